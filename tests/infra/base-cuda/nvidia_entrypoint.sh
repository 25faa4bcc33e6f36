#!/bin/bash
# Stand-in for NGC's /opt/nvidia/nvidia_entrypoint.sh, which hpcai-entrypoint chains to: NGC's
# prints a banner and runs the command; this one only runs it.
exec "$@"
