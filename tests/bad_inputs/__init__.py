"""The bad-input battery (issue 14): malformed inputs, each with its exact message, none of
which may change a file under ``results/``.

126 cases, by module (each module's docstring counts its categories):

- ``test_resources.py``: 66 (name lists 14, name pairs 8, explicit descriptors 2, dialect 5,
  dialog sources 13, base prompts 6, decision profiles 10, FairFund stimuli 5, attribute
  lists 3)
- ``test_decision_files.py``: 34 (decision prompts file 8, pre-registration 11, design
  settings 8, bundle sizes 4, config 3)
- ``test_answers.py``: 11 (response tables 8, answers that parse to null with a reason 3)
- ``test_api.py``: 13 (not retried 10, no API key 1, retryable past the time budget 2)
- ``test_workflow.py``: 2 ``snakemake --dry-run`` runs (exit code and message; e2e)
"""
