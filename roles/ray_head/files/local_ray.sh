# Which Ray runs on this node, without `ray status` (which takes 40 s to fail on a
# dead head): its processes and the cluster address Ray recorded at `ray start`.
# Prints JSON: {"processes": N, "address": "ip:port" or "", "address_answers": true/false}.
processes=$(pgrep -c -f 'gcs_server|raylet|ray/dashboard|ray::' 2>/dev/null || true)
address=$(head -n 1 /tmp/ray/ray_current_cluster 2>/dev/null | tr -d '[:space:]')
answers=false
if [ -n "$address" ] && timeout 3 bash -c "exec 3<>/dev/tcp/${address%:*}/${address##*:}" 2>/dev/null; then
    answers=true
fi
printf '{"processes": %s, "address": "%s", "address_answers": %s}\n' "${processes:-0}" "$address" "$answers"
