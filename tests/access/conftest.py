from .world import shared_world, world  # noqa: F401  (the matrix's fixtures)
