#!/bin/sh
# Starts ZooKeeper in the foreground with a configuration written from the
# environment:
#   ZK_TICK_MS  tickTime in milliseconds (default 200). Session timeouts may be
#               2 to 300 ticks; a short tick keeps the tests' timeouts short.
#   ZK_ID       this member's id (1, 2, ...) in an ensemble; unset: standalone.
#   ZK_SERVERS  the ensemble's members as a comma-separated list of host names
#               that resolve on the containers' network; member N is the Nth.
# The data directory lives in the container's file system, so it survives
# `docker stop` and `docker start` (ZooKeeper persists by design; zxids, and
# so dlock's fencing tokens, never go backwards across a restart).
set -eu

tick=${ZK_TICK_MS:-200}
dir=/var/lib/dlock-zookeeper
mkdir -p "$dir/data"
cfg="$dir/zoo.cfg"

cat >"$cfg" <<CFG
tickTime=$tick
initLimit=50
syncLimit=10
dataDir=$dir/data
clientPort=2181
maxClientCnxns=0
maxSessionTimeout=$((tick * 300))
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,mntr,stat,conf,cons
reconfigEnabled=false
CFG

if [ -n "${ZK_ID:-}" ]; then
	echo "$ZK_ID" >"$dir/data/myid"
	echo "quorumListenOnAllIPs=true" >>"$cfg"
	i=1
	for host in $(echo "$ZK_SERVERS" | tr ',' ' '); do
		echo "server.$i=$host:2888:3888" >>"$cfg"
		i=$((i + 1))
	done
fi

# slf4j-simple logs to stderr; without a binding ZooKeeper would log nothing.
# A short connect timeout lets elections get past a frozen member quickly.
# Empty container nodes (one per key) are reaped every second rather than
# every minute, so that the tests exercise the driver's recreation of them.
exec java -Xms64m -Xmx256m -XX:+UseSerialGC \
	-Dorg.slf4j.simpleLogger.defaultLogLevel=info \
	-Dzookeeper.cnxTimeout=1000 \
	-Dznode.container.checkIntervalMs=1000 \
	-cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar \
	org.apache.zookeeper.server.quorum.QuorumPeerMain "$cfg"
