"""Building AutoMedEval's judge training data, one resumable, cached step per command over files.

Every step reads and writes "instances" (:mod:`.instances`, one JSON object per line), so a step
can be rerun, replaced or inspected on its own: filter (a), generate (b), teach (c), export and
import of physicians' verdicts (d), quality (e), curriculum (f), introspection (g).
"""
