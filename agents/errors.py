"""The service errors of agent configuration (subclasses of `common.errors`: the API and
the admin show their message and details)."""

from __future__ import annotations

from common.errors import IllegalTransition, InvalidInput


class AgentNotPublished(IllegalTransition):
    """A run needs a published version and the agent has none."""

    code = "agent_not_published"


class AgentConfigInvalid(InvalidInput):
    """The draft does not validate; `details` maps field -> message."""

    code = "invalid_agent_config"


class NothingToPublish(IllegalTransition):
    code = "nothing_to_publish"
