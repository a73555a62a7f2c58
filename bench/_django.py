"""Shared start-up for benchmark scripts: project on sys.path, Django configured (dev database by default)."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryproject.settings")

import django  # noqa: E402

django.setup()
