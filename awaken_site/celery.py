"""The Celery app, configured from the Django settings (`CELERY_*`).

Workers get the whole application: Celery's Django fix-up sets Django up and the tasks of
the installed apps are imported, in the main process, before it forks the pool's children.
Everything a task needs is imported there (`preload_for_tasks`) and the garbage collector
is told to leave those objects alone (`freeze_before_fork`), so the children share those
memory pages with the main process instead of each copying them.

`celery beat` only sends the tasks of the schedule in the settings (`runs.sweep`, the
one-second `runs.fire_schedules` tick, retention): it gets neither the
fix-up (no `django.setup()`, no system checks) nor the tasks, so it does not load the
application (models, services, SDKs) at all.
"""

import gc
import os
import sys

from celery import Celery
from celery.signals import (
    task_postrun,
    worker_before_create_process,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
)
from django.conf import settings
from django.db import close_old_connections, connections
from django.utils.module_loading import import_string

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "awaken_site.settings")


def _running(subcommand: str) -> bool:
    """Whether this process is `celery … <subcommand>`. The `celery` command loads the app
    (`-A`) while its group callback runs, when click already knows the subcommand;
    anything else (no click, another entry point) counts as neither."""
    click = sys.modules.get("click")  # never imported just to ask: Django processes lack it
    context = click.get_current_context(silent=True) if click is not None else None
    return context is not None and context.invoked_subcommand == subcommand


if _running("worker"):
    # A worker's checkpoint that waits for a connection has no client to answer: when the
    # process is saturated it waits (a 503's 10 s would fail the step and redo it later,
    # adding load). Read by the settings, which load after this.
    os.environ.setdefault("DB_POOL_TIMEOUT", os.environ.get("DB_POOL_WORKER_TIMEOUT", "120"))

if _running("beat"):
    app = Celery("awaken", fixups=[])
    app.config_from_object("django.conf:settings", namespace="CELERY")
else:
    app = Celery("awaken")
    app.config_from_object("django.conf:settings", namespace="CELERY")
    app.autodiscover_tasks()


@worker_init.connect
def preload_for_tasks(**kwargs: object) -> None:
    """In the worker's main process, after Django and the tasks are loaded and before the
    pool forks: import what a task would otherwise import at its first use in every child.
    The openai and a2a SDKs stay out: only runs of such agents load them (in the child)."""
    # The channel layer (live events) is built at a run's first broadcast; its backend
    # module (channels_redis, redis' asyncio client) is the bulk of that.
    import_string(str(settings.CHANNEL_LAYERS["default"]["BACKEND"]))
    if settings.AWAKEN_METRICS_ADDR:  # this host's series, for Prometheus (docs/metrics.md)
        import_string("runs.metrics.serve_worker_metrics")(settings.AWAKEN_METRICS_ADDR)
    import_string("awaken_site.gc_tuning.settle")()


@worker_before_create_process.connect
def freeze_before_fork(**kwargs: object) -> None:
    """Just before the prefork pool forks a child (at start and for every replacement):
    collect, then move every object into the collector's permanent generation, so that
    collections in the child never write to (and so copy) the pages they share with the
    main process. Objects created later are collected as usual."""
    gc.collect()
    gc.freeze()


@worker_process_init.connect
def forget_inherited_database_connections(**kwargs: object) -> None:
    """In a prefork child, before Celery's own Django fixup closes connections: forget
    (without closing) any connection or psycopg pool inherited from the parent. Closing
    them here would send PostgreSQL a terminate message on sockets the parent still
    uses; psycopg never closes a connection on garbage collection in another process.
    The child then creates its own pool at its first query (Django creates pools
    lazily). The worker's main process does not query the database, so normally there
    is nothing to forget; this guards against a future import-time query."""
    # The PostgreSQL backend (psycopg) is loaded only in a worker's child, never in beat.
    from django.db.backends.postgresql.base import DatabaseWrapper  # noqa: PLC0415

    for conn in connections.all(initialized_only=True):
        conn.connection = None
    # Django keeps the pools in one class-level dict per process, keyed by alias.
    getattr(DatabaseWrapper, "_connection_pools", {}).clear()


@worker_process_shutdown.connect
def metrics_process_exited(pid: int | None = None, **kwargs: object) -> None:
    """A prefork child exits: its live gauges stop counting in the host's metrics
    (runs.metrics; loaded by name: prometheus-client must be imported after the settings,
    which set its multiprocess directory, and this module is imported before them)."""
    import_string("runs.metrics.process_exited")(pid)
    # the spans still buffered (docs/tracing.md): the child exits without atexit hooks
    import_string("runs.tracing.shutdown")()


@task_postrun.connect
def return_database_connections(**kwargs: object) -> None:
    """After each task, as Django does after each request: give the connection back to
    the process's pool (or close it, when it broke or is too old). Celery's own Django
    fix-up would close the whole pool around every task under prefork, so every run
    would open a new PostgreSQL connection; CELERY_DB_REUSE_MAX (settings) turns that
    off and this takes its place."""
    close_old_connections()
