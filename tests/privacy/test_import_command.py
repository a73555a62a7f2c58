"""manage.py import_memories: a whole tenant's export brought back user by user, one user's part into another user,
Mem0 memories by their own user ids; a bad file names its lines and imports nothing."""

import json

import pytest
from django.core.management import CommandError, call_command

from facts.models import Fact
from privacy.services import user_erase
from tests.factories import make_fact, make_tenant

pytestmark = pytest.mark.django_db


def write(path, *records) -> str:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return str(path)


def test_a_tenants_export_comes_back_user_by_user(tenant, tmp_path, capsys):
    make_fact(tenant=tenant, user_id="alice", content="Lives in Lisbon")
    make_fact(tenant=tenant, user_id="bob", content="Prefers tea")
    make_fact(tenant=tenant, user_id="bob", content="Works nights")
    call_command("export_memories", "--tenant", tenant.name, "--output", str(tmp_path / "all.jsonl"))
    for user_id in ("alice", "bob"):
        user_erase(tenant=tenant, user_id=user_id, actor="test")
    capsys.readouterr()

    call_command("import_memories", "--tenant", tenant.name, str(tmp_path / "all.jsonl"))

    out = capsys.readouterr().out.splitlines()
    assert out[0] == "alice: facts 1 created, 0 merged, 0 skipped; episodes 0 created, 0 skipped; conflicts 0 created"
    assert out[1].startswith("bob: facts 2 created")
    assert out[2].startswith("5 line(s) in memoryproject format, 2 user(s): facts 3 created")
    by_user = sorted(Fact.objects.filter(tenant=tenant).values_list("user_id", "content"))
    assert by_user == [("alice", "Lives in Lisbon"), ("bob", "Prefers tea"), ("bob", "Works nights")]


def test_with_user_everything_goes_to_that_user_of_the_tenant_named_by_id(tenant, tmp_path):
    other, _ = make_tenant("globex")
    header = {"type": "header", "format": "memoryproject", "version": 1, "user_id": "alice"}
    path = write(tmp_path / "alice.jsonl", header, {"type": "fact", "id": 7, "content": "Lives in Lisbon"})

    call_command("import_memories", "--tenant", str(other.pk), "--user", "zoe", path)

    assert list(Fact.objects.filter(tenant=other).values_list("user_id", flat=True)) == ["zoe"]
    assert not Fact.objects.filter(tenant=tenant).exists()


def test_mem0_memories_go_to_their_own_users_or_name_the_line_without_one(tenant, tmp_path):
    memories = [{"id": "a", "memory": "Is vegetarian", "user_id": "u1"}, {"id": "b", "memory": "Runs", "user_id": "u2"}]
    call_command("import_memories", "--tenant", tenant.name, write(tmp_path / "m.jsonl", *memories))

    assert sorted(Fact.objects.filter(tenant=tenant).values_list("user_id", flat=True)) == ["u1", "u2"]
    with pytest.raises(CommandError, match=r"line 2: user_id: This field is required"):
        call_command(
            "import_memories",
            "--tenant",
            tenant.name,
            write(tmp_path / "n.jsonl", memories[0], {"id": "c", "memory": "x"}),
        )


def test_a_bad_file_names_every_problem_and_imports_nothing(tenant, tmp_path):
    header = {"type": "header", "format": "memoryproject", "version": 1, "user_id": "alice"}
    path = write(
        tmp_path / "bad.jsonl",
        header,
        {"type": "fact", "id": 1, "content": "Good"},
        {"type": "fact", "id": 2, "content": ""},
        header | {"user_id": "bob"},
        {"type": "fact", "id": 3, "content": "Good too", "usage_count": -1},
    )

    with pytest.raises(CommandError) as raised:
        call_command("import_memories", "--tenant", tenant.name, path)

    assert str(raised.value).splitlines() == [
        "Nothing was imported; the file has problems:",
        "line 3: content: Must not be empty.",
        "line 5: usage_count: Must be a whole number from 0 to 2147483647.",
    ]
    assert not Fact.objects.exists()


def test_the_command_names_a_missing_file_or_tenant(tenant, tmp_path):
    with pytest.raises(CommandError, match="Cannot read"):
        call_command("import_memories", "--tenant", tenant.name, str(tmp_path / "missing.jsonl"))
    with pytest.raises(CommandError, match="No tenant named or numbered 'initech'"):
        call_command("import_memories", "--tenant", "initech", str(tmp_path / "missing.jsonl"))
