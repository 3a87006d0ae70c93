#!/usr/bin/env bash
# Lints, renders and validates the Helm chart (helm/agentd) and runs its tests (tests/helm).
# Needs python3 >= 3.11 and PyPI (only when the pinned requirements are not installed yet).
set -euo pipefail
cd "$(dirname "$0")/.."

# The project's virtualenv (scripts/setup.sh makes it) when there is one.
if [ -z "${PYTHON:-}" ] && [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; fi
PYTHON=${PYTHON:-python3}
REQUIREMENTS=tests/helm/requirements.txt
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore PIP_NO_INPUT=1

# True when every "name==version" pin of the requirements file is installed at that version.
satisfied() {
  "$1" - "$REQUIREMENTS" <<'PY'
import re, sys
from importlib.metadata import PackageNotFoundError, version
ok = True
for line in open(sys.argv[1]):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    name, _, pinned = line.partition("==")
    try:
        ok &= version(name.strip()) == pinned.strip()
    except PackageNotFoundError:
        ok = False
sys.exit(0 if ok else 1)
PY
}

if ! satisfied "$PYTHON"; then
  if ! "$PYTHON" -m pip install --quiet -r "$REQUIREMENTS"; then
    # A distribution's Python that refuses user packages (PEP 668): use a private venv.
    echo "check-chart: pip install into $PYTHON failed; using .venv" >&2
    [ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
    PYTHON=.venv/bin/python
    satisfied "$PYTHON" || "$PYTHON" -m pip install --quiet -r "$REQUIREMENTS"
  fi
fi

exec "$PYTHON" -m pytest -q -p no:cacheprovider tests/helm "$@"
