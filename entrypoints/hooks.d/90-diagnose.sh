# shellcheck shell=sh disable=SC2154
# (sourced by hpcai-entrypoint, which defines the hpcai_* functions and variables)
# 90-diagnose: with HPCAI_DEBUG=1, report on stderr what every hook set (and which hook),
# every user value left alone (and what the hook would have set), the libfabric file the
# payload will load and the NCCL plugin. Runs last so it sees the final environment.

[ "${HPCAI_DEBUG:-0}" = 1 ] || return 0

_dg_say() { printf 'hpcai-entrypoint: %s\n' "$*" >&2; }
_dg_seen=' '
_dg_rest=$HPCAI__SET
while [ -n "$_dg_rest" ]; do
    _dg_line=${_dg_rest%%"$HPCAI__NL"*}
    _dg_rest=${_dg_rest#*"$HPCAI__NL"}
    _dg_var=${_dg_line%%"$HPCAI__TAB"*}
    _dg_hook=${_dg_line#*"$HPCAI__TAB"}
    case $_dg_seen in *" $_dg_var "*) continue ;; esac
    _dg_seen="$_dg_seen$_dg_var "
    hpcai_get "$_dg_var"
    _dg_say "set   $_dg_var=$hpcai_value  [$_dg_hook]"
done
_dg_rest=$HPCAI__KEPT
while [ -n "$_dg_rest" ]; do
    _dg_line=${_dg_rest%%"$HPCAI__NL"*}
    _dg_rest=${_dg_rest#*"$HPCAI__NL"}
    _dg_var=${_dg_line%%"$HPCAI__TAB"*}
    _dg_line=${_dg_line#*"$HPCAI__TAB"}
    hpcai_get "$_dg_var"
    _dg_say "kept  $_dg_var=$hpcai_value  (user value; [${_dg_line%%"$HPCAI__TAB"*}] would set ${_dg_line#*"$HPCAI__TAB"})"
done
hpcai_resolve_lib libfabric.so.1
_dg_say "libfabric: ${hpcai_value:-not found} (source: ${HPCAI_FABRIC:-unknown})"
_dg_say "nccl plugin: ${NCCL_NET_PLUGIN:-none}${LD_PRELOAD:+ (LD_PRELOAD=$LD_PRELOAD)}"
