# shellcheck shell=sh disable=SC2034  # HPCAI__* below are read by the entrypoint, its hooks and the shim
# hpcai-lib.sh: the functions hpcai-entrypoint, its hooks and hpcai-shim share, sourced by both
# (never run): setting a variable unless the user did (hpcai_set), numbers and names checked
# before a shell reads them (hpcai_uint, hpcai_quote, hpcai_check_job), private folders
# (hpcai_private_dir, hpcai_rank_dir), host lists, and the library lookups of --check. It lies
# beside hpcai-entrypoint: in the image under $HPCAI_PREFIX/bin, in the repository under
# entrypoints/, where hpcai-shim finds it too. POSIX sh, no forks on hot paths (see
# hpcai-entrypoint); defining these functions runs nothing.

HPCAI__SET=''      # "VAR<tab>hook<nl>" for every variable a hook set or extended
HPCAI__KEPT=''     # "VAR<tab>hook<tab>would-be value<nl>" for every user value left alone
HPCAI__BAD=' '     # " VAR VAR " already warned about as malformed (one warning per variable)
# The rank variables torch reads: set but empty is never a choice there (torch fails on RANK=''
# or MASTER_ADDR=''), so hpcai_set fills an empty one like an unset one, with a warning
# (hpcai_check_job passes an empty rank or size over as unset, too). Any other variable keeps an
# empty user value (CUDA_VISIBLE_DEVICES='' means "no GPU").
HPCAI__FILL_EMPTY=' RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE NODE_RANK MASTER_ADDR MASTER_PORT '
HPCAI__NL='
'
HPCAI__TAB='	'
# Every rank and size variable of a launcher that the entrypoint, its hooks or hpcai-shim read (a test
# checks that they read no other): Slurm, Open MPI, Flux, PMI/PALS/Hydra, PMIx, torch's own. Each
# must be a non-negative decimal integer when set and not empty (hpcai_check_job).
HPCAI__RANKS='SLURM_PROCID SLURM_LOCALID SLURM_NODEID OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_LOCAL_RANK
    FLUX_TASK_RANK FLUX_TASK_LOCAL_ID PMI_RANK PMI_LOCAL_RANK PALS_RANKID PALS_LOCAL_RANKID
    PALS_NODEID MPI_LOCALRANKID PMIX_RANK RANK LOCAL_RANK NODE_RANK'
HPCAI__SIZES='SLURM_STEP_NUM_TASKS SLURM_NTASKS SLURM_NPROCS SLURM_NTASKS_PER_NODE
    SLURM_STEP_NUM_NODES SLURM_JOB_NUM_NODES SLURM_NNODES HPCAI_NNODES OMPI_COMM_WORLD_SIZE
    OMPI_COMM_WORLD_LOCAL_SIZE FLUX_JOB_SIZE FLUX_JOB_NNODES PMI_SIZE PMI_LOCAL_SIZE MPI_LOCALNRANKS
    WORLD_SIZE LOCAL_WORLD_SIZE'
# RANK:SIZE...: a rank is below the first of its sizes that is set and not empty (the one
# 30-ranks pairs it with: a step's task count before the job's). SLURM_NODEID and SLURM_LOCALID have none here:
# whether Slurm counts them within the step or the job is not something to refuse a launch on.
HPCAI__RANK_BOUNDS='SLURM_PROCID:SLURM_STEP_NUM_TASKS:SLURM_NTASKS:SLURM_NPROCS
    OMPI_COMM_WORLD_RANK:OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK:OMPI_COMM_WORLD_LOCAL_SIZE
    FLUX_TASK_RANK:FLUX_JOB_SIZE PMI_RANK:PMI_SIZE PALS_RANKID:PMI_SIZE PMI_LOCAL_RANK:PMI_LOCAL_SIZE
    PALS_LOCAL_RANKID:PMI_LOCAL_SIZE MPI_LOCALRANKID:MPI_LOCALNRANKS RANK:WORLD_SIZE
    LOCAL_RANK:LOCAL_WORLD_SIZE'
# The host lists 30-ranks reads MASTER_ADDR from, and their longest accepted value. Slurm writes
# them compressed ("nid[000001-009408]" for a whole machine) and refuses to set any environment
# string of 128 KiB or more (MAX_ENV_STRLEN, Linux's MAX_ARG_STRLEN); 64 KiB still holds an
# allocation of 9,000 nodes that share no neighbour (7 bytes each: "000123,"), so a longer one
# is not Slurm's.
HPCAI__HOSTLISTS='SLURM_STEP_NODELIST SLURM_JOB_NODELIST SLURM_NODELIST'
HPCAI__HOSTLIST_MAX=65536

# A message never stops the launch, even with stderr closed under `sh -e`.
hpcai_warn() { printf 'hpcai-entrypoint: warning: %s\n' "$*" >&2 || :; }
hpcai_debug() { [ "${HPCAI_DEBUG:-0}" = 1 ] && printf 'hpcai-entrypoint: %s\n' "$*" >&2; return 0; }

# hpcai_isset VAR: true when VAR is set in the environment, even to an empty string.
hpcai_isset() { eval "[ -n \"\${$1+x}\" ]"; }

# hpcai_get VAR: the value of VAR in $hpcai_value (no subshell).
hpcai_get() { eval "hpcai_value=\${$1-}"; }

# hpcai_set VAR VALUE: export VAR=VALUE unless the user already set VAR; remember who did what.
# A set-but-empty rank variable (HPCAI__FILL_EMPTY) counts as unset: filled, with a warning.
# Returns 0 either way: keeping a user value is the rule, not a failure, and hooks call this as
# a plain statement, which `sh -e` would end on a non-zero status.
hpcai_set() {
    if hpcai_isset "$1"; then
        hpcai_get "$1"
        _set_fill=0
        if [ -z "$hpcai_value" ]; then
            case $HPCAI__FILL_EMPTY in *" $1 "*) _set_fill=1 ;; esac
        fi
        if [ "$_set_fill" = 0 ]; then
            case "$HPCAI__SET" in
                "$1$HPCAI__TAB"* | *"$HPCAI__NL$1$HPCAI__TAB"*) ;;  # ours (earlier hook): keep first
                *) HPCAI__KEPT="$HPCAI__KEPT$1$HPCAI__TAB${HPCAI_HOOK:-?}$HPCAI__TAB$2$HPCAI__NL" ;;
            esac
            return 0
        fi
        hpcai_quote "$2"
        hpcai_warn "$1 is set but empty; using $1=$hpcai_value"
    fi
    eval "export $1=\"\$2\""
    HPCAI__SET="$HPCAI__SET$1$HPCAI__TAB${HPCAI_HOOK:-?}$HPCAI__NL"
}

# hpcai_replace VAR VALUE: rewrite a variable an earlier hook set (never a user value).
hpcai_replace() {
    hpcai_owned "$1" || return 1
    eval "export $1=\"\$2\""
    HPCAI__SET="$HPCAI__SET$1$HPCAI__TAB${HPCAI_HOOK:-?}$HPCAI__NL"
}

# hpcai_owned VAR: true when VAR was set by a hook of this entrypoint (not by the user).
hpcai_owned() {
    case "$HPCAI__SET" in
        "$1$HPCAI__TAB"* | *"$HPCAI__NL$1$HPCAI__TAB"*) return 0 ;;
    esac
    return 1
}

# hpcai_path_add VAR DIR front|back: extend a colon list (LD_LIBRARY_PATH, LD_PRELOAD); the
# user's entries stay, in their order.
hpcai_path_add() {
    hpcai_get "$1"
    case ":$hpcai_value:" in *":$2:"*) return 0 ;; esac
    if [ -z "$hpcai_value" ]; then
        hpcai_value=$2
    elif [ "$3" = front ]; then
        hpcai_value="$2:$hpcai_value"
    else
        hpcai_value="$hpcai_value:$2"
    fi
    eval "export $1=\"\$hpcai_value\""
    case "$HPCAI__SET" in
        *"$1$HPCAI__TAB${HPCAI_HOOK:-?} (extended)$HPCAI__NL"*) ;;
        *) HPCAI__SET="$HPCAI__SET$1$HPCAI__TAB${HPCAI_HOOK:-?} (extended)$HPCAI__NL" ;;
    esac
}

# hpcai_upper WORD: $hpcai_value = WORD upper-cased, '-' -> '_' (hook names; no `tr` fork).
hpcai_upper() {
    _u_in=$1
    hpcai_value=''
    while [ -n "$_u_in" ]; do
        _u_rest=${_u_in#?}
        _u_c=${_u_in%"$_u_rest"}
        case $_u_c in
            a) _u_c=A ;; b) _u_c=B ;; c) _u_c=C ;; d) _u_c=D ;; e) _u_c=E ;; f) _u_c=F ;;
            g) _u_c=G ;; h) _u_c=H ;; i) _u_c=I ;; j) _u_c=J ;; k) _u_c=K ;; l) _u_c=L ;;
            m) _u_c=M ;; n) _u_c=N ;; o) _u_c=O ;; p) _u_c=P ;; q) _u_c=Q ;; r) _u_c=R ;;
            s) _u_c=S ;; t) _u_c=T ;; u) _u_c=U ;; v) _u_c=V ;; w) _u_c=W ;; x) _u_c=X ;;
            y) _u_c=Y ;; z) _u_c=Z ;; -) _u_c=_ ;;
        esac
        hpcai_value="$hpcai_value$_u_c"
        _u_in=$_u_rest
    done
}

# hpcai_is_uint WORD: true for a non-negative decimal integer, 1 to 18 digits (leading zeros
# allowed; see hpcai_decimal): the one test a number passes before `[ -lt ]` or $((...)) sees it,
# where dash stops with "Illegal number" on anything else. 18 digits fit 64-bit arithmetic.
hpcai_is_uint() {
    case $1 in '' | *[!0-9]* | ???????????????????*) return 1 ;; esac
    return 0
}

# hpcai_uint VAR: true when VAR holds a number (hpcai_is_uint); $hpcai_value = it without leading
# zeros. False when VAR is unset, and when it is set but malformed ('', "abc", "1e3", "-1"): the
# value is then ignored, after a one-line warning naming VAR and its value (once per VAR). For a
# rank or size variable only '' gets here: hpcai_check_job refused any other malformed value.
hpcai_uint() {
    hpcai_get "$1"
    if hpcai_is_uint "$hpcai_value"; then
        hpcai_decimal "$hpcai_value"
        return 0
    fi
    hpcai_isset "$1" && hpcai_bad_value "$1" "not a non-negative integer"
    hpcai_value=''
    return 1
}

# hpcai_first_uint VAR...: like hpcai_first_of, for numbers: $hpcai_value/$hpcai_from = the first
# VAR that holds a number (without leading zeros); malformed ones on the way are warned about
# and passed over. False when none does.
hpcai_first_uint() {
    for _fu_var in "$@"; do
        if hpcai_uint "$_fu_var"; then
            # shellcheck disable=SC2034  # read by hooks
            hpcai_from=$_fu_var
            return 0
        fi
    done
    # shellcheck disable=SC2034  # read by hooks
    hpcai_from=''
    return 1
}

# hpcai_bad_value VAR REASON: the one-line warning for a malformed value, once per VAR.
hpcai_bad_value() {
    case $HPCAI__BAD in *" $1 "*) return 0 ;; esac
    HPCAI__BAD="$HPCAI__BAD$1 "
    hpcai_get "$1"
    hpcai_quote "$hpcai_value"
    hpcai_warn "ignoring $1=$hpcai_value: $2"
}

# hpcai_quote TEXT: $hpcai_value = TEXT in single quotes, fit for one line of a message: \ and '
# written \\ and \', newline and tab \n and \t, any other non-printable character '?', and cut
# after 64 characters ("..." follows). A hostile value can neither break the line nor drive the
# terminal. Only used on warning paths (a loop over characters).
hpcai_quote() {
    _q_in=$1
    _q_n=0
    hpcai_value=''
    while [ -n "$_q_in" ]; do
        if [ "$_q_n" -ge 64 ]; then
            hpcai_value="$hpcai_value..."
            break
        fi
        _q_rest=${_q_in#?}
        _q_c=${_q_in%"$_q_rest"}
        case $_q_c in
            \\ | \') _q_c=\\$_q_c ;;
            "$HPCAI__NL") _q_c='\n' ;;
            "$HPCAI__TAB") _q_c='\t' ;;
            [[:print:]]) ;;
            *) _q_c='?' ;;
        esac
        hpcai_value=$hpcai_value$_q_c
        _q_in=$_q_rest
        _q_n=$((_q_n + 1))
    done
    hpcai_value="'$hpcai_value'"
}

# hpcai_safe_name TEXT: $hpcai_value = TEXT with each character outside [A-Za-z0-9._-] made '_',
# for file names built from USER or job ids ("../x" or "a/b" never lead out of TMPDIR). The
# letters are listed, not ranges: bracket ranges follow the locale's collation in some shells.
hpcai_safe_name() {
    hpcai_value=$1
    case $1 in *[!ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-]*) ;; *) return 0 ;; esac
    _n_in=$1
    hpcai_value=''
    while [ -n "$_n_in" ]; do
        _n_rest=${_n_in#?}
        _n_c=${_n_in%"$_n_rest"}
        case $_n_c in [!ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-]) _n_c=_ ;; esac
        hpcai_value=$hpcai_value$_n_c
        _n_in=$_n_rest
    done
}

# hpcai_private_dir NAME: $hpcai_value = a folder that only this user can write, for files a
# program trusts (compiled-kernel caches, the host-fabric links): ${TMPDIR:-/tmp}/NAME (NAME
# through hpcai_safe_name), made with mode 0700. One that is there already (another rank of this
# job on this node won the race to make it, or an earlier run) is used only if it is a folder,
# not a symbolic link, owned by this user ([ -O ]: owner == `id -u`, without a fork), writable
# by this user and by neither group nor others. Anything else is never used: a one-line warning
# says why, and a fresh `mktemp -d` takes its place, so nothing another user planted is ever
# loaded. False when no private folder can be had (e.g. TMPDIR not writable); $hpcai_value then
# says why. Costs one fork: mkdir, or ls for the mode bits of a folder that was there.
hpcai_private_dir() {
    hpcai_safe_name "$1"
    _p_tmp=${TMPDIR:-/tmp}
    _p_dir=$_p_tmp/$hpcai_value
    # made by this mkdir: ours and 0700, nothing to check. It fails when a racing rank made it
    # first; then it is checked like any folder that was there.
    if [ ! -e "$_p_dir" ] && [ ! -L "$_p_dir" ] && mkdir -m 700 -- "$_p_dir" 2>/dev/null; then
        hpcai_value=$_p_dir
        return 0
    fi
    # shellcheck disable=SC3067  # test -O: not POSIX, but dash, bash and busybox sh have it
    if [ -L "$_p_dir" ]; then
        _p_why='is a symbolic link'
    elif [ ! -e "$_p_dir" ]; then
        _p_why='cannot be created'
    elif [ ! -d "$_p_dir" ]; then
        _p_why='is not a folder'
    elif [ ! -O "$_p_dir" ]; then
        _p_why='belongs to another user'
    elif [ ! -w "$_p_dir" ] || [ ! -x "$_p_dir" ]; then
        _p_why='is not writable by its owner'
    else
        _p_mode=$(ls -ld -- "$_p_dir" 2>/dev/null) || _p_mode=''
        case $_p_mode in
            d????w* | d???????w*) _p_why='is writable by group or others' ;;  # drwxrwxrwx
            d?????????*) hpcai_value=$_p_dir; return 0 ;;
            *) _p_why='cannot be inspected' ;;
        esac
    fi
    if _p_new=$(mktemp -d "$_p_dir.XXXXXXXX" 2>/dev/null) && [ -n "$_p_new" ]; then
        [ "$_p_why" = 'cannot be created' ] || hpcai_warn "$_p_dir $_p_why; using $_p_new instead"
        hpcai_value=$_p_new
        return 0
    fi
    hpcai_value="no private folder in $_p_tmp: $_p_dir $_p_why, and mktemp failed"
    return 1
}

# hpcai_rank_dir PREFIX: $hpcai_value = a private folder (hpcai_private_dir) for this job step
# and rank, PREFIX-USER-JOB-STEP-RANK, for links a hook puts first on LD_LIBRARY_PATH (the host
# fabric's, the host MPI's: each its own PREFIX). Outside a job it is PREFIX-USER-local-PID,
# keyed by our pid (kept by exec), and our folders of dead pids are removed. False as
# hpcai_private_dir is, $hpcai_value saying why.
hpcai_rank_dir() {
    hpcai_safe_name "${USER:-${LOGNAME:-nouser}}"
    _rd_user=$hpcai_value
    if hpcai_uint SLURM_JOB_ID; then
        _rd_job=$hpcai_value
        hpcai_first_uint SLURM_PROCID OMPI_COMM_WORLD_RANK PMI_RANK || hpcai_value=$$
        _rd_name=$1-$_rd_user-$_rd_job-${SLURM_STEP_ID:-0}-$hpcai_value
    else
        # shellcheck disable=SC3067  # test -O: not POSIX, but dash, bash and busybox sh have it
        for _rd_old in "${TMPDIR:-/tmp}/$1-$_rd_user-local-"*; do
            _rd_pid=${_rd_old##*-}
            _rd_pid=${_rd_pid%%.*}  # a mktemp stand-in (hpcai_private_dir) is NAME.XXXXXXXX
            if [ -d "$_rd_old" ] && [ ! -L "$_rd_old" ] && [ -O "$_rd_old" ] \
                && [ ! -d "/proc/$_rd_pid" ]; then
                rm -rf "$_rd_old"
            fi
        done
        _rd_name=$1-$_rd_user-local-$$
    fi
    hpcai_private_dir "$_rd_name"
}

# hpcai_job_id: $hpcai_value = this batch job's number (SLURM_JOB_ID, else the digits that start
# PBS_JOBID "123456.server"), without leading zeros. False outside a job, or when the variable is
# malformed (a warning then, and the value is ignored).
hpcai_job_id() {
    hpcai_uint SLURM_JOB_ID && return 0
    hpcai_isset PBS_JOBID || return 1
    hpcai_value=${PBS_JOBID%%[!0-9]*}
    if hpcai_is_uint "$hpcai_value"; then
        hpcai_decimal "$hpcai_value"
        return 0
    fi
    hpcai_bad_value PBS_JOBID "no job number at its start"
    hpcai_value=''
    return 1
}

# hpcai_decimal WORD: $hpcai_value = WORD without leading zeros, so $((...)) never reads it
# as octal ("0089" is an error there).
hpcai_decimal() {
    hpcai_value=${1#"${1%%[!0]*}"}
    [ -n "$hpcai_value" ] || hpcai_value=0
}

# hpcai_check_job: the one check of the launcher's rank variables, before anything runs (the
# entrypoint calls it before its hooks, hpcai-shim before its own). False, with the reason in
# $hpcai_value (one line: values through hpcai_quote), when a variable of HPCAI__RANKS or
# HPCAI__SIZES holds something that is not a non-negative decimal integer (hpcai_is_uint: '1 2',
# '-1', ' 1', 20 digits), when a size is 0, when a rank is not below its size
# (HPCAI__RANK_BOUNDS), or when a host list (HPCAI__HOSTLISTS) is longer than
# HPCAI__HOSTLIST_MAX or holds a control character or a space. An empty variable counts as unset,
# as ${VAR:-...} has it: the hooks fill an empty RANK from the launcher's variables (hpcai_set)
# and pass over an empty SLURM_PROCID (hpcai_uint), each with a warning. Each caller refuses to
# start on false: ranks that guessed a number would share a rank's files and container names,
# and torch would wait for ranks that never come.
hpcai_check_job() {
    for _j_var in $HPCAI__RANKS $HPCAI__SIZES; do
        hpcai_get "$_j_var"
        [ -n "$hpcai_value" ] || continue  # unset, or empty: unset
        hpcai_is_uint "$hpcai_value" && continue
        hpcai_quote "$hpcai_value"
        hpcai_value="$_j_var=$hpcai_value is not a non-negative decimal integer (at most 18 digits)"
        return 1
    done
    for _j_var in $HPCAI__SIZES; do
        hpcai_get "$_j_var"
        case $hpcai_value in
            *[!0]* | '') ;;
            *) hpcai_value="$_j_var=$hpcai_value: a count of tasks or nodes is at least 1"; return 1 ;;
        esac
    done
    for _j_pair in $HPCAI__RANK_BOUNDS; do
        _j_rank=${_j_pair%%:*}
        hpcai_get "$_j_rank"
        [ -n "$hpcai_value" ] || continue
        _j_sizes=${_j_pair#*:}:
        while [ -n "$_j_sizes" ]; do
            _j_size=${_j_sizes%%:*}
            _j_sizes=${_j_sizes#*:}
            hpcai_get "$_j_size"
            [ -n "$hpcai_value" ] || continue
            hpcai_decimal "$hpcai_value"
            _j_n=$hpcai_value
            hpcai_get "$_j_rank"
            hpcai_decimal "$hpcai_value"
            [ "$hpcai_value" -lt "$_j_n" ] && break
            hpcai_value="$_j_rank=$hpcai_value is not below $_j_size=$_j_n (a rank counts from 0)"
            return 1
        done
    done
    for _j_var in $HPCAI__HOSTLISTS; do
        hpcai_get "$_j_var"
        if [ "${#hpcai_value}" -gt "$HPCAI__HOSTLIST_MAX" ]; then
            hpcai_value="$_j_var is ${#hpcai_value} characters long, over the $HPCAI__HOSTLIST_MAX of a Slurm host list"
            return 1
        fi
        case $hpcai_value in
            *[[:cntrl:][:space:]]*)
                hpcai_quote "$hpcai_value"
                hpcai_value="$_j_var=$hpcai_value is not a host list: it holds a control character or a space"
                return 1 ;;
        esac
    done
    return 0
}

# hpcai_hostlist_first LIST: $hpcai_value = first host of a Slurm host list:
# "nid[001234-001236,001300],login1" -> nid001234; "a[1-2]-b[07-09]" -> a1-b07; an unbalanced
# "nid[1" is kept literally. Linear in the list's length: the list is cut by field splitting
# (IFS, globbing off), never by ${x#*]} or ${x#"$long"}, which dash and bash match in quadratic
# time (seconds per rank for a long fragmented list).
hpcai_hostlist_first() {
    _h_ifs=$IFS
    case $- in *f*) _h_glob=0 ;; *) _h_glob=1; set -f ;; esac
    _h_out=''
    IFS=']'
    # shellcheck disable=SC2086  # split on ']': every segment but the last ended in one
    set -- $1.  # '.': a trailing ']' would drop the last, empty, segment
    _h_last=$#
    _h_n=0
    hpcai__hostlist_scan "$@"
    IFS=$_h_ifs
    [ "$_h_glob" = 0 ] || set +f
    hpcai_value=$_h_out
}
# The segments' loop of hpcai_hostlist_first, in a function of its own so that it ends with
# `return`, not `break`: bash 5.2 runs none of a trap's commands when the signal lands right after
# a `break` (the shim, which loads these functions, passes signals on from traps).
hpcai__hostlist_scan() {
    for _h_seg; do
        _h_n=$((_h_n + 1))
        [ "$_h_n" != "$_h_last" ] || _h_seg=${_h_seg%.}
        IFS='[,'
        # shellcheck disable=SC2086
        set -- $_h_seg
        _h_lit=${1-}  # up to the first '[' or ','
        case $_h_seg in
            "$_h_lit"\[*)
                if [ "$_h_n" = "$_h_last" ]; then  # no ']' after it: literally, up to a ','
                    IFS=,
                    # shellcheck disable=SC2086
                    set -- $_h_seg
                    _h_out=$_h_out${1-}
                    return 0
                fi
                IFS='['
                # shellcheck disable=SC2086
                set -- $_h_seg
                IFS=',-'
                # shellcheck disable=SC2086  # the first number of the range
                set -- ${2-}
                _h_out=$_h_out$_h_lit${1-}
                ;;
            *) _h_out=$_h_out$_h_lit; return 0 ;;  # a ',' (the next host) or the end
        esac
    done
}

# hpcai_tasks_on_node SPEC NODE: $hpcai_value = tasks on node NODE (0-based) for a Slurm
# tasks-per-node SPEC like "4(x2),3"; empty (and false) when SPEC is malformed or too short.
hpcai_tasks_on_node() {
    _t_spec=$1,
    hpcai_value=''
    hpcai_is_uint "$2" || return 1
    hpcai_decimal "$2"
    _t_node=$hpcai_value
    hpcai_value=''
    while [ -n "$_t_spec" ]; do
        _t_item=${_t_spec%%,*}
        _t_spec=${_t_spec#*,}
        case $_t_item in
            *\(x*\)) _t_n=${_t_item%%\(*}; _t_rep=${_t_item#*\(x}; _t_rep=${_t_rep%\)} ;;
            *) _t_n=$_t_item; _t_rep=1 ;;
        esac
        hpcai_is_uint "$_t_n" && hpcai_is_uint "$_t_rep" || return 1
        hpcai_decimal "$_t_n"; _t_n=$hpcai_value  # "08" is octal, an error, in $((...))
        hpcai_decimal "$_t_rep"; _t_rep=$hpcai_value
        hpcai_value=''
        if [ "$_t_node" -lt "$_t_rep" ]; then
            hpcai_value=$_t_n
            return 0
        fi
        _t_node=$((_t_node - _t_rep))
    done
    return 1
}

# hpcai_first_of VAR...: $hpcai_value/$hpcai_from = value/name of the first non-empty VAR.
# False when none is: call it as a condition (`if`, `||`), never as a bare statement (`sh -e`).
hpcai_first_of() {
    for _f_var in "$@"; do
        hpcai_get "$_f_var"
        if [ -n "$hpcai_value" ]; then
            hpcai_from=$_f_var
            return 0
        fi
    done
    hpcai_value=''
    # shellcheck disable=SC2034  # read by hooks
    hpcai_from=''
    return 1
}

# hpcai_gpu_vendor: $hpcai_value = cuda|rocm|none, from HPCAI_GPU_VENDOR or what the image
# and node show (ROCm first: ROCm images may also carry CUDA stubs).
hpcai_gpu_vendor() {
    hpcai_value=${HPCAI_GPU_VENDOR:-}
    [ -n "$hpcai_value" ] && return 0
    if [ -e /dev/kfd ] || [ -d /opt/rocm ]; then
        hpcai_value=rocm
    elif [ -e /dev/nvidiactl ] || [ -d /usr/local/cuda ] || [ -n "${NVIDIA_VISIBLE_DEVICES:-}" ]; then
        hpcai_value=cuda
    else
        hpcai_value=none
    fi
}

# hpcai_problem WHAT REASON: a mounted host WHAT (FABRIC, MPI) cannot be used. HPCAI_WHAT_PROBLEM
# = REASON (--check reports it as a FAIL line); a warning, or the end of the launch with exit 78
# (EX_CONFIG) under HPCAI_STRICT_WHAT=1. WHAT is one of those two words, never user input.
hpcai_problem() {
    eval "HPCAI_$1_PROBLEM=\$2"
    hpcai_get "HPCAI_STRICT_$1"
    if [ "${hpcai_value:-0}" = 1 ] && [ "${HPCAI__CHECKING:-0}" != 1 ]; then
        printf 'hpcai-entrypoint: error: %s (HPCAI_STRICT_%s=1)\n' "$2" "$1" >&2
        trap - EXIT  # said already
        exit 78
    fi
    hpcai_warn "$2"
}

hpcai_fabric_problem() { hpcai_problem FABRIC "$1"; }

# hpcai_resolve_lib SONAME: $hpcai_value = the file the loader will map for SONAME: the first
# LD_LIBRARY_PATH dir holding it, else the ld.so cache; symlinks resolved. Diagnostics only.
hpcai_resolve_lib() {
    hpcai_value=''
    _l_rest=${LD_LIBRARY_PATH:-}:
    while [ "$_l_rest" != "${_l_rest#*:}" ] || [ -n "$_l_rest" ]; do
        _l_dir=${_l_rest%%:*}
        _l_rest=${_l_rest#*:}
        if [ -n "$_l_dir" ] && [ -e "$_l_dir/$1" ]; then
            hpcai_value=$_l_dir/$1
            break
        fi
        [ -n "$_l_rest" ] || break
    done
    if [ -z "$hpcai_value" ] && command -v ldconfig >/dev/null 2>&1; then
        # `|| :`: the loop's status is its last test's, false when the name is not listed
        hpcai_value=$(ldconfig -p 2>/dev/null | while read -r _l_name _l_rest; do
            [ "$_l_name" = "$1" ] && { printf '%s' "${_l_rest##*=> }"; break; }
        done) || :
    fi
    if [ -n "$hpcai_value" ] && command -v readlink >/dev/null 2>&1; then
        hpcai_value=$(readlink -f "$hpcai_value") || :
    fi
}
