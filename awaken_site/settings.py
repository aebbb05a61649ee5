"""Settings, read from the environment. No variable set = the embedded default:
SQLite, an in-memory channel layer and Celery on an in-memory broker with a worker
inside the serving process. Set DATABASE_URL and REDIS_URL for the distributed mode."""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured

from .api_options import SPECTACULAR, rest_framework
from .env import env_bool, env_bool_or_networks, env_float, env_int, env_list, env_str
from .mcp_options import *  # noqa: F403  (AWAKEN_MCP_*, MCP tool servers: docs/mcp.md)
from .redis_options import broker_transport_options, caches, channel_layers
from .sso_options import *  # noqa: F403  (OIDC_*, AWAKEN_LOCAL_LOGIN: docs/sso.md)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("AWAKEN_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", True)
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is false")
    SECRET_KEY = "dev-only-insecure-key-set-SECRET_KEY-in-production"

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "channels",
    "agents",
    "runs",
    "runs.accounts",
    "runs.operations",
    "runs.decisions",
    "runs.replays",
    "common",
    "csp",  # django-csp: the Content-Security-Policy header (see its settings below)
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # a span per request when OTEL_* turn tracing on (docs/tracing.md); else it drops out
    "runs.tracing.TracingMiddleware",
    "csp.middleware.CSPMiddleware",
    "awaken_site.middleware.DatabaseUnavailableMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "awaken_site.middleware.RejectNulMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "awaken_site.urls"
WSGI_APPLICATION = "awaken_site.wsgi.application"
ASGI_APPLICATION = "awaken_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------
VAR_DIR.mkdir(parents=True, exist_ok=True)
DATABASE_URL = env_str("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'awaken.sqlite3'}"
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_health_checks=True)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and env_bool("DB_POOL", True):
    # One psycopg connection pool per process (Django creates it at the first query, so
    # each Celery prefork child gets its own: awaken_site/celery.py). Daphne serves each
    # request on a new thread, so per-thread persistent connections piled up (one per
    # thread ever used) and opening one per request cost a tenth of the CPU; the pool
    # caps a process at DB_POOL_MAX_SIZE connections and lends them out per request.
    # A request that waits DB_POOL_TIMEOUT seconds for one gets a 503 (middleware
    # below). Sizing: README, "Sizing the database connection pool".
    if env_int("DB_CONN_MAX_AGE", 0) != 0:
        raise ImproperlyConfigured(
            "DB_CONN_MAX_AGE applies without the pool only: set DB_POOL=false to use it"
        )
    _pool_max = env_int("DB_POOL_MAX_SIZE", 8, minimum=1)
    _pool_min = env_int("DB_POOL_MIN_SIZE", 1, minimum=0)
    if _pool_min > _pool_max:
        raise ImproperlyConfigured(
            f"DB_POOL_MIN_SIZE ({_pool_min}) must not exceed DB_POOL_MAX_SIZE ({_pool_max})"
        )
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # Django requires it: the pool keeps them
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": _pool_min,
        "max_size": _pool_max,
        "timeout": env_float("DB_POOL_TIMEOUT", 10.0, minimum=0.1),
    }
else:
    # DB_POOL=false: persistent connections, one per thread, kept DB_CONN_MAX_AGE seconds.
    DATABASES["default"]["CONN_MAX_AGE"] = env_int("DB_CONN_MAX_AGE", 60, minimum=0)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        # Writers take the lock at BEGIN, so concurrent writers queue instead of
        # failing with "database is locked" half-way through a transaction.
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Channels and Celery ----------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL")
# Explicit socket timeouts on every Redis client: awaken_site/redis_options.py.
REDIS_CONNECT_TIMEOUT = env_float("REDIS_CONNECT_TIMEOUT", 5.0, minimum=0.1)
CHANNEL_LAYERS = channel_layers(REDIS_URL, REDIS_CONNECT_TIMEOUT)

CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL or "memory://localhost/")
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Notifications are sent by their own worker (`celery worker -Q notifications`, the
# Procfile's `notify`), so a receiver that hangs never holds a slot runs need; run
# workers consume the default queue only (`-Q celery`).
CELERY_TASK_ROUTES = {"runs.deliver_notifications": {"queue": "notifications"}}
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
# The executor (docs/executor.md): a run worker (`celery worker --pool threads`) holds up
# to AWAKEN_RUNS_IN_FLIGHT runs at once, each on a thread; what a run waits on (its model,
# a remote agent) is awaited on the process's one event loop, and it holds a database
# connection only for a claim or a checkpoint. A process at its limit takes no task more
# (prefetch 1 per slot): due runs wait for any process with room. `--concurrency` on the
# command line still wins. (The pool is named on the command line, not here: Celery
# cannot tell an explicit `--pool prefork` from its default.)
AWAKEN_RUNS_IN_FLIGHT = env_int("AWAKEN_RUNS_IN_FLIGHT", 256, minimum=1)
# Requests a web process lets into Django's views at once (awaken_site/admission.py); the
# rest wait on the event loop. 0: no limit.
AWAKEN_WEB_CONCURRENT_VIEWS = env_int("AWAKEN_WEB_CONCURRENT_VIEWS", 16, minimum=0)
# Objects a server process allocates (net) before a young garbage collection (Python's
# default is 700); what is alive after start-up is frozen out of collections
# (awaken_site/gc_tuning.py). 0: the collector as Python sets it.
AWAKEN_GC_GEN0 = env_int("AWAKEN_GC_GEN0", 20_000, minimum=0)
CELERY_WORKER_CONCURRENCY = AWAKEN_RUNS_IN_FLIGHT
# Celery's Django fix-up closes every database connection, and under prefork the whole
# connection pool, before and after each task: a new PostgreSQL connection per run. This
# makes it do so only every so many tasks; awaken_site/celery.py returns the connection to
# the pool after each task instead, as Django does after each request.
CELERY_DB_REUSE_MAX = 1_000_000
# Above the longest run segment; the lease sweep, not redelivery, recovers runs.
CELERY_BROKER_TRANSPORT_OPTIONS = broker_transport_options(
    env_int("CELERY_VISIBILITY_TIMEOUT", 3600, minimum=60), REDIS_CONNECT_TIMEOUT
)

# --- Awaken -------------------------------------------------------------------------------
# Run an in-process Celery worker and sweep thread in `manage.py serve`.
AWAKEN_EMBEDDED_WORKER = env_bool(
    "AWAKEN_EMBEDDED_WORKER", CELERY_BROKER_URL.startswith("memory://")
)
AWAKEN_LEASE_SECONDS = env_float("AWAKEN_LEASE_SECONDS", 30.0, minimum=1.0)
AWAKEN_SWEEP_SECONDS = env_float("AWAKEN_SWEEP_SECONDS", 5.0, minimum=0.1)
AWAKEN_BUDGET_CACHE_SECONDS = env_float("AWAKEN_BUDGET_CACHE_SECONDS", 1.0, minimum=0.0)
AWAKEN_MAX_ATTEMPTS = env_int("AWAKEN_MAX_ATTEMPTS", 5, minimum=1)
# Wiring, not a tuning knob (no environment variable): what follows a run's end, new tickets
# and closed ones, in order, in the transaction that ended the run or opened or closed the
# tickets (runs.services.run_end); every way a run ends calls its list once.
AWAKEN_RUN_END_EFFECTS = [
    "runs.services.end_effects.effect_count_finished",
    "runs.operations.effects.effect_notify_ended",
    "runs.operations.effects.effect_failure_record",
    "runs.services.end_effects.effect_metrics",
    "runs.services.end_effects.effect_background_cancel",
    "runs.services.end_effects.effect_deliver_next",
    "runs.replays.effects.effect_replay_ended",
    "runs.services.end_effects.effect_abort_remote",
]
AWAKEN_TICKET_OPENED_EFFECTS = [
    "runs.operations.effects.effect_notify_tickets",
    "runs.replays.effects.effect_replay_decide",
]
AWAKEN_TICKET_CLOSED_EFFECTS = ["runs.operations.effects.effect_slack_tickets_closed"]
# The sweep's steps, in this order, each given the same time and adding its counts
# (runs.services.execution.runs_sweep), and what wraps a run's tools (each given the run).
AWAKEN_SWEEP_STEPS = [
    "runs.decisions.services.deadlines.deadlines_sweep",
    "runs.services.execution.leases_recover",
    "runs.services.execution.runs_redispatch_lost",
    "runs.services.execution.inputs_sweep",
    "runs.replays.services.replay_flow.replays_sweep",
    "runs.services.background.background_sweep",
    "runs.operations.services.budgets.budgets_sweep",
]
AWAKEN_STEP_GATES = ["runs.operations.services.budgets.budget_gate"]
AWAKEN_RUN_TOOL_WRAPPERS = ["runs.replays.services.replay_tools.replay_tool_wrapper"]
# What runs beside the embedded worker (runs.embedded): the sweep, the schedules' tick,
# the notification senders (what `celery beat` and the workers do when distributed).
AWAKEN_EMBEDDED_PARTS = [
    "runs.embedded.sweep_ticks",
    "runs.operations.embedded.schedules_ticks",
    "runs.operations.embedded.notification_senders",
]
# The gauges /metrics reads from the database when scraped (runs.metrics).
AWAKEN_METRICS_DATABASE_GAUGES = [
    "runs.metrics.run_gauges",
    "runs.operations.metrics.notification_gauges",
    "runs.operations.metrics.budget_gauges",
]
# What renders the dashboard's figures that the core's websocket pushes (runs.consumers).
AWAKEN_DASHBOARD_FIGURES = "runs.operations.views.dashboard.dashboard_figures_html"
# The runs list's filters whose runs another app keeps (runs.selectors.runs.run_scope):
# query parameter -> what makes its scope of the parameter's value.
AWAKEN_RUN_LIST_SCOPES = {"failure_group": "runs.operations.selectors.failures.FailureGroupScope"}
# The pages with saved views: page -> the module with its filter_problems(params) and
# error_page(request, error) (runs.accounts.views.saved_view_forms).
AWAKEN_SAVED_VIEW_PAGES = {
    "runs": "runs.accounts.views.saved_view_forms",
    "inbox": "runs.decisions.views.inbox_saved_views",
}
# Replays (docs/replays.md): at most this many replay runs at once, all sets together.
AWAKEN_REPLAY_CONCURRENCY = env_int("AWAKEN_REPLAY_CONCURRENCY", 2, minimum=1)
# Retention: run trees finished more than this many days ago are deleted daily by the
# beat task `runs.prune_old_runs` (docs/retention.md); 0 keeps everything.
AWAKEN_RETENTION_DAYS = env_int("AWAKEN_RETENTION_DAYS", 0, minimum=0)
# Distributed mode: `celery beat` runs the sweep (the embedded default runs it in a thread)
# and, daily at 03:17 UTC, retention (which does nothing while AWAKEN_RETENTION_DAYS is 0).
CELERY_BEAT_SCHEDULE = {
    "runs-sweep": {"task": "runs.sweep", "schedule": AWAKEN_SWEEP_SECONDS},
    "runs-prune": {"task": "runs.prune_old_runs", "schedule": crontab(hour=3, minute=17)},
    # Schedules (docs/schedules.md): a one-second tick fires the slots that have come; a
    # tick no worker took within 5 s is dropped (the next one does its work).
    "runs-schedules": {
        "task": "runs.fire_schedules",
        "schedule": 1.0,
        "options": {"expires": 5.0},
    },
    # Notifications (docs/notifications.md): the outbox is drained after each event
    # commits; this tick sends the retries that have come due.
    "runs-notifications": {
        "task": "runs.deliver_notifications",
        "schedule": 2.0,
        "options": {"expires": 10.0},
    },
}
AWAKEN_HTTP_GET_ALLOW_PRIVATE = env_bool("AWAKEN_HTTP_GET_ALLOW_PRIVATE", False)
AWAKEN_HTTP_GET_TIMEOUT = env_float("AWAKEN_HTTP_GET_TIMEOUT", 10.0, minimum=0.1)
AWAKEN_HTTP_GET_MAX_BYTES = env_int("AWAKEN_HTTP_GET_MAX_BYTES", 200_000, minimum=1)
# How large what people send may be, in characters (common/limits.py): a message's text,
# a ticket's answer or edited arguments (as JSON), a comment or a reason.
AWAKEN_MAX_MESSAGE_CHARS = env_int("AWAKEN_MAX_MESSAGE_CHARS", 32_000, minimum=1)
AWAKEN_MAX_ANSWER_CHARS = env_int("AWAKEN_MAX_ANSWER_CHARS", 32_000, minimum=1)
AWAKEN_MAX_COMMENT_CHARS = env_int("AWAKEN_MAX_COMMENT_CHARS", 2_000, minimum=1)
# Fernet keys (comma-separated, newest first) encrypting provider and endpoint secrets at
# rest; older keys still decrypt, so keys rotate by prepending. Empty: derived from
# SECRET_KEY (fine for the embedded default, set it in production).
AWAKEN_ENCRYPTION_KEYS = env_list("AWAKEN_ENCRYPTION_KEYS", [])
# Remote A2A endpoints on private, loopback or link-local addresses (tests, on-prem agents).
AWAKEN_ENDPOINTS_ALLOW_PRIVATE = env_bool("AWAKEN_ENDPOINTS_ALLOW_PRIVATE", False)
# Model providers (OpenAI-compatible base URLs) on non-public addresses: false (default),
# true (any), or the addresses and networks allowed, e.g. 127.0.0.1,::1 for Ollama or
# vLLM on this machine, 10.20.0.0/16 for a GPU network (README: Model providers).
AWAKEN_PROVIDERS_ALLOW_PRIVATE = env_bool_or_networks("AWAKEN_PROVIDERS_ALLOW_PRIVATE")
# Notifications (docs/notifications.md): a failed delivery is retried after
# base * 2^(attempt-1) seconds (capped at max, with jitter) until it has had MAX_ATTEMPTS;
# webhook targets on private, loopback or link-local addresses only with ALLOW_PRIVATE.
AWAKEN_NOTIFY_MAX_ATTEMPTS = env_int("AWAKEN_NOTIFY_MAX_ATTEMPTS", 20, minimum=1)
AWAKEN_NOTIFY_RETRY_BASE_SECONDS = env_float("AWAKEN_NOTIFY_RETRY_BASE_SECONDS", 10.0, minimum=0.1)
AWAKEN_NOTIFY_RETRY_MAX_SECONDS = env_float("AWAKEN_NOTIFY_RETRY_MAX_SECONDS", 3600.0, minimum=0.1)
# A keyboard approval or rejection in the inbox waits this many seconds for an undo
# before it is sent (at most 60; 0 sends it at once).
AWAKEN_KEY_UNDO_SECONDS = env_float("AWAKEN_KEY_UNDO_SECONDS", 5.0, minimum=0.0)
AWAKEN_NOTIFY_TIMEOUT = env_float("AWAKEN_NOTIFY_TIMEOUT", 10.0, minimum=0.1)
# The circuit breaker per destination: after this many failed attempts in a row nothing
# is sent to it for CIRCUIT_SECONDS (its deliveries wait, unattempted), then one is tried.
AWAKEN_NOTIFY_CIRCUIT_FAILURES = env_int("AWAKEN_NOTIFY_CIRCUIT_FAILURES", 5, minimum=1)
AWAKEN_NOTIFY_CIRCUIT_SECONDS = env_float("AWAKEN_NOTIFY_CIRCUIT_SECONDS", 60.0, minimum=0.1)
AWAKEN_NOTIFY_ALLOW_PRIVATE = env_bool("AWAKEN_NOTIFY_ALLOW_PRIVATE", False)
# How long a process trusts that no rule or subscription exists (opening a ticket then
# costs no query); 0 asks every time. Changes made in this process apply at once.
AWAKEN_NOTIFY_ROUTES_CACHE_SECONDS = env_float(
    "AWAKEN_NOTIFY_ROUTES_CACHE_SECONDS", 5.0, minimum=0.0
)
# The site's address as operators reach it, for links in notifications (no trailing /).
AWAKEN_PUBLIC_URL = env_str("AWAKEN_PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")
# Approvals from Slack and e-mail (docs/approvals-slack-email.md).
AWAKEN_SLACK_API_URL = env_str("AWAKEN_SLACK_API_URL", "https://slack.com/api/")
AWAKEN_SLACK_LINK_BY_EMAIL = env_bool("AWAKEN_SLACK_LINK_BY_EMAIL", False)
AWAKEN_EMAIL_APPROVAL_SECONDS = env_int("AWAKEN_EMAIL_APPROVAL_SECONDS", 86_400, minimum=60)
# Prometheus metrics (docs/metrics.md). /metrics wants `Authorization: Bearer <token>`
# when AWAKEN_METRICS_TOKEN is set; without one it is a 404 unless AWAKEN_METRICS_PUBLIC.
AWAKEN_METRICS_TOKEN = env_str("AWAKEN_METRICS_TOKEN", "")
AWAKEN_METRICS_PUBLIC = env_bool("AWAKEN_METRICS_PUBLIC", False)
# The database gauges are read at most once per this many seconds per process.
AWAKEN_METRICS_CACHE_SECONDS = env_float("AWAKEN_METRICS_CACHE_SECONDS", 5.0, minimum=0.0)
# host:port on which a Celery worker's main process also serves its host's series.
AWAKEN_METRICS_ADDR = env_str("AWAKEN_METRICS_ADDR", "")
# Several processes (Celery prefork children, daphne processes) move the same series:
# prometheus-client sums them from files in one directory per host, which it must know
# before it is first imported, so this sets PROMETHEUS_MULTIPROC_DIR for the process.
# Distributed mode: under VAR_DIR by default; embedded: one process, no directory.
AWAKEN_METRICS_DIR = env_str("PROMETHEUS_MULTIPROC_DIR") or env_str(
    "AWAKEN_METRICS_DIR",
    "" if CELERY_BROKER_URL.startswith("memory://") else str(VAR_DIR / "prometheus"),
)
if AWAKEN_METRICS_DIR:
    Path(AWAKEN_METRICS_DIR).mkdir(parents=True, exist_ok=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = AWAKEN_METRICS_DIR

# Our agents served over A2A (docs/a2a-serving.md): "all" published agents, "none", or a
# comma-separated list of agent slugs. /.well-known/agent-card.json is the card of
# AWAKEN_A2A_DEFAULT_AGENT (else the first served agent by slug); the agent cards are
# public unless AWAKEN_A2A_PUBLIC_CARDS is false (every other call needs an API token).
AWAKEN_A2A_SERVE = env_list("AWAKEN_A2A_SERVE", ["all"])
AWAKEN_A2A_DEFAULT_AGENT = env_str("AWAKEN_A2A_DEFAULT_AGENT", "")
AWAKEN_A2A_PUBLIC_CARDS = env_bool("AWAKEN_A2A_PUBLIC_CARDS", True)
# The binding the cards list first (clients take the first they speak): JSONRPC or HTTP+JSON.
AWAKEN_A2A_PREFERRED_BINDING = env_str("AWAKEN_A2A_PREFERRED_BINDING", "JSONRPC")
if AWAKEN_A2A_PREFERRED_BINDING not in ("JSONRPC", "HTTP+JSON"):
    raise ImproperlyConfigured("AWAKEN_A2A_PREFERRED_BINDING must be JSONRPC or HTTP+JSON")
# How long a blocking message/send waits for its task to settle before it answers with the
# task as it stands (the client then follows it), and how long a stream stays open.
AWAKEN_A2A_WAIT_SECONDS = env_float("AWAKEN_A2A_WAIT_SECONDS", 60.0, minimum=0.0)
AWAKEN_A2A_STREAM_SECONDS = env_float("AWAKEN_A2A_STREAM_SECONDS", 900.0, minimum=1.0)

EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "awaken-ops@localhost")

# Role groups grant site-wide, team memberships per team (common/access.py).
AUTHENTICATION_BACKENDS = [
    # ModelBackend, refusing passwords when AWAKEN_LOCAL_LOGIN says so (awaken_site/sso.py)
    "awaken_site.sso.PasswordBackend",
    "common.access.TeamRoleBackend",
    "awaken_site.sso.SSOBackend",
]

# --- Single sign-on (OpenID Connect; docs/sso.md): awaken_site/sso_options.py ----------------

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "runs:dashboard"
LOGOUT_REDIRECT_URL = "login"

# --- Auth, i18n, static ---------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
# The product speaks English only and translates nothing: without the translation
# machinery every number, date and "3 minutes ago" a page renders skips a language lookup
# (about a tenth of rendering a page of 50 runs).
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
if DEBUG:
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns when it is missing
# Served by WhiteNoise: straight from the app folders in DEBUG, from collectstatic otherwise.
WHITENOISE_USE_FINDERS = DEBUG
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 1_048_576, minimum=1024)

# --- Production hardening (active when DEBUG is false) ---------------------------------------
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if not DEBUG:
    SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", True)
    CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", True)
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
    if not SECURE_HSTS_PRELOAD:
        # Preloading is a commitment for the whole domain; operators opt in explicitly.
        SILENCED_SYSTEM_CHECKS = ["security.W021"]
    if env_bool("SECURE_PROXY_SSL_HEADER", False):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- Content-Security-Policy (django-csp 4) ------------------------------------------------
# No inline script or style anywhere: the templates load static files only and hand URLs
# and settings to the scripts in data-* attributes (the API docs page included: its
# template is overridden in templates/drf_spectacular/). 'self' in connect-src also
# covers the page's own host and port over websockets (CSP Level 3: ws: or wss: from an
# http: page, wss: from an https: page; Chromium 71+, Firefox, Safari 16+). For older
# browsers, or sockets served from another host, list their origins (comma-separated,
# e.g. wss://ops.example.com) in CSP_CONNECT_SRC_EXTRA.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'", *env_list("CSP_CONNECT_SRC_EXTRA", [])],
        "frame-ancestors": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "object-src": ["'none'"],
    },
}
# --- end Content-Security-Policy -------------------------------------------------------------

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "channels_redis": {"level": "INFO"},
        "celery": {"level": env_str("CELERY_LOG_LEVEL", "WARNING")},
        "kombu": {"level": "WARNING"},
        # one line per model or remote-agent request: the run's events say more
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
    },
}

# --- REST API (runs.api, /api/v1/) -------------------------------------------------------------
INSTALLED_APPS += ["drf_spectacular", "drf_spectacular_sidecar"]

# Requests per API token (per user for the browser session): "<n>/<s|min|h|day>".
import re  # noqa: E402

# A verified API token is reused for this long per process without a database query:
# revoking it (or deactivating its user) elsewhere takes effect within it. 0 disables.
AWAKEN_TOKEN_CACHE_SECONDS = env_float("AWAKEN_TOKEN_CACHE_SECONDS", 5.0, minimum=0.0)
# The dashboard's live figures are computed at most once per this many seconds per
# process, however many dashboards are open (each refreshes when runs change). 0: always.
AWAKEN_DASHBOARD_CACHE_SECONDS = env_float("AWAKEN_DASHBOARD_CACHE_SECONDS", 2.0, minimum=0.0)
# Most rows a CSV export (the runs list, the audit log) writes; a longer one stops there
# and ends with a "# truncated" row (docs/exports.md).
AWAKEN_EXPORT_MAX_ROWS = env_int("AWAKEN_EXPORT_MAX_ROWS", 100_000, minimum=1)
# A streamed response (an export, an event stream) whose client takes nothing for this
# many seconds is cut off (awaken_site/flow_control.py, docs/exports.md).
AWAKEN_STREAM_STALL_SECONDS = env_float("AWAKEN_STREAM_STALL_SECONDS", 300.0, minimum=1.0)
API_THROTTLE_RATE = env_str("API_THROTTLE_RATE", "600/min")
if not re.fullmatch(r"\d+/(s|sec|m|min|h|hour|d|day)", API_THROTTLE_RATE):
    raise ImproperlyConfigured(
        f"API_THROTTLE_RATE must look like 600/min, got {API_THROTTLE_RATE!r}"
    )

# Local-memory caches per process, the throttle's counters in Redis when there is one.
CACHES = caches(REDIS_URL, REDIS_CONNECT_TIMEOUT)

REST_FRAMEWORK = rest_framework(API_THROTTLE_RATE)
SPECTACULAR_SETTINGS = SPECTACULAR
