"""`{% frozen_teams_for user as frozen %}`: the frozen teams the user can see (the banner
on every page while one of their teams is in an incident freeze)."""

from __future__ import annotations

from typing import Any

from django import template

from common.access import frozen_teams
from common.models import Team
from common.teams import teams_visible

register = template.Library()


@register.simple_tag
def frozen_teams_for(user: Any) -> list[Team]:
    if user is None or not getattr(user, "is_authenticated", False):
        return []
    frozen = frozen_teams(user)  # cached on the user: no query on most pages
    if not frozen:
        return []
    return list(teams_visible(user).filter(pk__in=frozen))
