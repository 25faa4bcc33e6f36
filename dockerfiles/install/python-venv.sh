#!/bin/bash
# python-venv.sh: the image's venv, /opt/hpcai/venv, on top of the base's python3.
# --system-site-packages keeps the base's own (e.g. NGC's pinned) packages visible and untouched.
# CPU flavors install their framework here; pip reads PIP_FIND_LINKS (--wheelhouse) first.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
python3 -m venv --system-site-packages "$HPCAI_PREFIX/venv"
py=$(venv_python)
"$py" -m pip install --no-cache-dir -q --upgrade pip wheel
if [ -n "${HPCAI_FRAMEWORK_REQUIREMENT:-}" ]; then
  log "installing $HPCAI_FRAMEWORK_REQUIREMENT"
  # shellcheck disable=SC2086  # several requirements, separated by spaces
  "$py" -m pip install --no-cache-dir $HPCAI_FRAMEWORK_REQUIREMENT
fi
# What the venv holds, from the installed metadata: importing the framework here would cost 3-10 s
# of every cold build and prove little, since the builder is not the final stage (its system
# libraries differ); the image's own check (`hpcai-entrypoint --check`, the sanity payload) does.
case ${HPCAI_FRAMEWORK:-} in
  pytorch) dists=(torch) ;;
  tensorflow) dists=(tensorflow tensorflow-cpu) ;;  # NGC/ROCm ship the first, the CPU flavor the second
  *) dists=() ;;
esac
if [ ${#dists[@]} -gt 0 ]; then
  "$py" - "${dists[@]}" <<'PY' || die "the framework (${dists[*]}) is not installed in $HPCAI_PREFIX/venv"
import importlib.metadata as m, sys
for name in sys.argv[1:]:
    try:
        print(name, m.version(name))
        break
    except m.PackageNotFoundError:
        pass
else:
    sys.exit(1)
PY
fi
