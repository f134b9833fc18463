#!/usr/bin/env bash
# runc for the offline kind e2e's dockerd (--add-runtime): the same runc, with every capability this
# machine's root lacks taken out of the container's process first. kind runs its nodes --privileged,
# and dockerd 20.10 then asks for every capability the kernel knows; where root's bounding set
# misses one (these machines' root lacks CAP_SYS_RESOURCE) runc fails with "unable to apply caps:
# operation not permitted". A container never gets more than its creator holds, so the rest of
# the privileged set is unchanged. Edits the bundle's config.json (create, run) or the --process
# file (exec), then execs runc with the arguments as given.
set -euo pipefail

names=(CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP LINUX_IMMUTABLE
  NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE SYS_RAWIO SYS_CHROOT
  SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE
  AUDIT_WRITE AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ
  PERFMON BPF CHECKPOINT_RESTORE)
bounding=$((16#$(awk '/^CapBnd:/ { print $2 }' /proc/self/status)))
missing=()
for i in "${!names[@]}"; do
  (( bounding >> i & 1 )) || missing+=("\"CAP_${names[$i]}\"")
done

strip() { # <json file> <jq path of the process object: .process in config.json, "" in a process file>
  local file=$1 tmp
  [ -f "$file" ] || return 0
  tmp=$(mktemp "$file.XXXXXX")
  jq --argjson missing "[$(IFS=,; echo "${missing[*]}")]" \
    "if $2.capabilities then $2.capabilities |= map_values(. - \$missing) else . end" "$file" >"$tmp"
  mv "$tmp" "$file"
}

if [ "${#missing[@]}" -gt 0 ]; then
  args=("$@")
  for i in "${!args[@]}"; do
    case "${args[$i]}" in
      --bundle|-b) strip "${args[$((i + 1))]}/config.json" .process ;;
      --bundle=*) strip "${args[$i]#--bundle=}/config.json" .process ;;
      --process|-p) strip "${args[$((i + 1))]}" "" ;;
      --process=*) strip "${args[$i]#--process=}" "" ;;
    esac
  done
fi
exec /usr/sbin/runc "$@"
