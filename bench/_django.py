"""Shared start-up for benchmark scripts: project on sys.path, Django configured (dev database by default)."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryproject.settings")
os.environ.setdefault("DJANGO_ENV", "development")  # a benchmark is a development tool: the key in var/ will do

import django  # noqa: E402

django.setup()
