"""`manage.py qcluster`: django-q's cluster, stopping within its timeout on SIGTERM (an app of its own, listed
before django_q so that its command wins, while django_q's admin still registers before the memoryproject app's)."""
