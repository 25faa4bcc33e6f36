# shellcheck shell=sh disable=SC2154
# (sourced by hpcai-entrypoint, which defines the hpcai_* functions and variables)
# 40-hostname: reach MASTER_ADDR through another network name, e.g. "<host>i" for InfiniBand
# at JSC (HPCAI_MASTER_ADDR_SUFFIX=i).
#
# Applied only to a MASTER_ADDR this entrypoint derived (a user or launcher value is left
# alone), and only when "<host><suffix>" resolves: MASTER_ADDR becomes its address, so torch
# never reverse-maps it to the plain hostname. When it does not resolve, MASTER_ADDR keeps the
# plain host and a warning says so.

[ -n "${HPCAI_MASTER_ADDR_SUFFIX:-}" ] || return 0
if ! hpcai_owned MASTER_ADDR; then
    hpcai_debug "hostname: MASTER_ADDR was set by the user; suffix not applied"
    return 0
fi

_hn_name=$MASTER_ADDR$HPCAI_MASTER_ADDR_SUFFIX
_hn_addr=''
if command -v getent >/dev/null 2>&1; then
    _hn_line=$(getent hosts "$_hn_name" 2>/dev/null) && _hn_addr=${_hn_line%%[ 	]*}
fi
if [ -n "$_hn_addr" ]; then
    hpcai_replace MASTER_ADDR "$_hn_addr"
    hpcai_debug "hostname: $_hn_name resolves to $_hn_addr"
else
    hpcai_warn "$_hn_name does not resolve; MASTER_ADDR stays $MASTER_ADDR"
fi
