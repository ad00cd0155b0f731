"""The bad-input battery (issues 14 and 20): malformed inputs, each with its exact message,
none of which may change a file under ``results/``.

165 cases, by module (each module's docstring counts its categories):

- ``test_resources.py``: 66 (name lists 14, name pairs 8, explicit descriptors 2, dialect 5,
  dialog sources 13, base prompts 6, decision profiles 10, FairFund stimuli 5, attribute
  lists 3)
- ``test_decision_files.py``: 34 (decision prompts file 8, pre-registration 11, design
  settings 8, bundle sizes 4, config 3)
- ``test_decision_stimuli.py``: 26 (prompt tables built from bad stimuli 9, templates without
  their field 7, the lock 4, the pre-registration's meaning 4, a prompt answered twice 2)
- ``test_answers.py``: 11 (response tables 8, answers that parse to null with a reason 3)
- ``test_api.py``: 13 (not retried 10, no API key 1, retryable past the time budget 2)
- ``test_workflow.py``: 15 (e2e): 8 ``snakemake --dry-run`` runs of bad settings and names,
  6 bad ``--configfile`` files, 1 stale installed library

Beside them, ``tests/e2e/test_decision.py`` reruns a finished study after the lock (a design
changed, an edited pre-registration elsewhere, a deleted lock once answers exist).
"""
