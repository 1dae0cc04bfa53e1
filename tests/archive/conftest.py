from tests.leftovers import no_forked_child_left_in_loop  # noqa: F401  (autouse: a forked child left running is killed)
