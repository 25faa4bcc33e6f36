# shellcheck shell=sh disable=SC2154
# (sourced by hpcai-entrypoint, which defines the hpcai_* functions and variables)
# 30-ranks: torch.distributed variables from whichever launcher started this rank.
#
# One source family is used for all values, so a stale variable of another launcher never
# mixes in: Open MPI (OMPI_COMM_WORLD_*), then Slurm (SLURM_*; unless PMI_RANK disagrees with
# SLURM_PROCID, i.e. mpiexec inside an allocation), then Flux (FLUX_TASK_*, FLUX_JOB_*; its PMI
# server sets PMI_RANK too, and a disagreeing one is again an mpiexec inside the job), then
# PMI/PALS (PMI_*, PALS_*), then PMIx.
# MASTER_ADDR falls back to the first host of SLURM_STEP_NODELIST/SLURM_JOB_NODELIST (or
# $PBS_NODEFILE) and MASTER_PORT to 61000 + job id % 4536 (enroot's rule) when unset.
# The entrypoint (and hpcai-shim) refused a malformed rank or size (SLURM_PROCID='1 2',
# SLURM_NTASKS=0, OMPI_COMM_WORLD_RANK=abc) and a bad host list before this runs
# (hpcai_check_job); hpcai_uint still reads each number, without leading zeros. An empty one
# (OMPI_COMM_WORLD_RANK='') counts as unset, and a malformed job id is ignored: one warning each.
# A set-but-empty RANK, MASTER_ADDR, ... is filled like an unset one, with a warning (hpcai_set).

_rk_family=''
if hpcai_uint OMPI_COMM_WORLD_RANK; then
    _rk_family=ompi
elif hpcai_uint SLURM_PROCID \
    && { _rk_procid=$hpcai_value; ! hpcai_uint PMI_RANK || [ "$hpcai_value" = "$_rk_procid" ]; }; then
    _rk_family=slurm
elif hpcai_uint FLUX_TASK_RANK \
    && { _rk_task=$hpcai_value; ! hpcai_uint PMI_RANK || [ "$hpcai_value" = "$_rk_task" ]; }; then
    _rk_family=flux
elif hpcai_first_uint PMI_RANK PALS_RANKID; then
    _rk_family=pmi
elif hpcai_uint PMIX_RANK; then
    _rk_family=pmix
fi

# _rk_from VAR SOURCE...: set VAR from the first SOURCE variable that holds a number.
_rk_from() {
    _rk_var=$1
    shift
    if hpcai_first_uint "$@"; then
        hpcai_set "$_rk_var" "$hpcai_value"
    fi
}

case $_rk_family in
    ompi)
        _rk_from RANK OMPI_COMM_WORLD_RANK
        _rk_from LOCAL_RANK OMPI_COMM_WORLD_LOCAL_RANK
        _rk_from WORLD_SIZE OMPI_COMM_WORLD_SIZE
        _rk_from LOCAL_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_SIZE
        ;;
    slurm)
        _rk_from RANK SLURM_PROCID
        _rk_from LOCAL_RANK SLURM_LOCALID
        _rk_from WORLD_SIZE SLURM_STEP_NUM_TASKS SLURM_NTASKS SLURM_NPROCS
        _rk_from NODE_RANK SLURM_NODEID
        if hpcai_first_of SLURM_STEP_TASKS_PER_NODE SLURM_TASKS_PER_NODE; then
            _rk_spec=$hpcai_value
            _rk_spec_var=$hpcai_from
            hpcai_uint SLURM_NODEID || hpcai_value=0
            if hpcai_tasks_on_node "$_rk_spec" "$hpcai_value"; then
                hpcai_set LOCAL_WORLD_SIZE "$hpcai_value"
            else
                hpcai_quote "$_rk_spec"
                hpcai_warn "cannot read tasks per node from $_rk_spec_var=$hpcai_value; LOCAL_WORLD_SIZE not set"
            fi
        elif hpcai_uint SLURM_NTASKS_PER_NODE; then
            hpcai_set LOCAL_WORLD_SIZE "$hpcai_value"
        elif hpcai_isset SLURM_TASKS_PER_NODE; then
            hpcai_warn "SLURM_TASKS_PER_NODE is empty; LOCAL_WORLD_SIZE not set"
        fi
        ;;
    flux)
        _rk_from RANK FLUX_TASK_RANK
        _rk_from LOCAL_RANK FLUX_TASK_LOCAL_ID
        _rk_from WORLD_SIZE FLUX_JOB_SIZE
        # Flux names no tasks per node or node id: `flux run -N N -n T` spreads the tasks evenly
        # and in blocks (its default task map), so a node holds T/N and task R runs on node
        # R / (T/N). An uneven job (T not a multiple of N) is not one hpcai starts.
        if hpcai_uint FLUX_JOB_SIZE && _rk_size=$hpcai_value && hpcai_uint FLUX_JOB_NNODES; then
            if [ $((_rk_size % hpcai_value)) -eq 0 ]; then
                _rk_local=$((_rk_size / hpcai_value))
                hpcai_set LOCAL_WORLD_SIZE "$_rk_local"
                hpcai_uint FLUX_TASK_RANK
                hpcai_set NODE_RANK "$((hpcai_value / _rk_local))"
            else
                hpcai_warn "FLUX_JOB_SIZE=$_rk_size tasks on FLUX_JOB_NNODES=$hpcai_value nodes are uneven; LOCAL_WORLD_SIZE and NODE_RANK not set"
            fi
        fi
        ;;
    pmi)
        _rk_from RANK PMI_RANK PALS_RANKID
        _rk_from LOCAL_RANK PMI_LOCAL_RANK PALS_LOCAL_RANKID MPI_LOCALRANKID
        _rk_from WORLD_SIZE PMI_SIZE
        _rk_from LOCAL_WORLD_SIZE PMI_LOCAL_SIZE MPI_LOCALNRANKS
        _rk_from NODE_RANK PALS_NODEID
        ;;
    pmix)
        _rk_from RANK PMIX_RANK
        ;;
esac

if [ -z "${MASTER_ADDR:-}" ]; then  # unset, or set but empty (filled with a warning)
    if hpcai_first_of SLURM_STEP_NODELIST SLURM_JOB_NODELIST SLURM_NODELIST; then
        hpcai_hostlist_first "$hpcai_value"
        hpcai_set MASTER_ADDR "$hpcai_value"
    elif [ -n "${PBS_NODEFILE:-}" ] && [ -f "$PBS_NODEFILE" ] && [ -r "$PBS_NODEFILE" ] \
        && IFS= read -r _rk_host <"$PBS_NODEFILE" && [ -n "$_rk_host" ]; then
        hpcai_set MASTER_ADDR "$_rk_host"
    fi
fi

if hpcai_job_id; then
    hpcai_set MASTER_PORT "$((61000 + hpcai_value % 4536))"
fi
