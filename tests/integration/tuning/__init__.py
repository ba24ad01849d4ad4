"""Integration tests of the tuning engine (real MetaSchedule on the LLVM target)."""

#: Evolutionary-search settings (option ``"search"``) for tests of kill, resume, accounting and
#: preemption, where what matters is that rounds are searched, built and measured, not how good
#: the candidates are: about a tenth of TVM's default search work per round (population 512,
#: 4 genetic iterations), which is most of a small task's tuning time on one thread.
SMALL_SEARCH = {"population_size": 64, "init_min_unmeasured": 16, "genetic_num_iters": 1}
