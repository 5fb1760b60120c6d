#!/bin/sh
# Starts a Hazelcast member in the foreground with a configuration written
# from the environment:
#   HZ_CLUSTER   the cluster name (default dev).
#   HZ_MEMBERS   the cluster's members as a comma-separated list of host names
#                that resolve on the containers' network, joined by TCP/IP;
#                unset: a member alone. Multicast and auto-detection are off
#                either way, so a member never joins anything else.
#   HZ_PROPS     more Hazelcast properties, as -Dname=value options (the
#                cluster tests shorten failure detection and split-brain
#                merging with them).
# Nothing is persisted: a restarted member starts empty.
set -eu

cluster=${HZ_CLUSTER:-dev}
cfg=/tmp/hazelcast.yaml

{
	echo "hazelcast:"
	echo "  cluster-name: $cluster"
	echo "  network:"
	echo "    port:"
	echo "      port: 5701"
	echo "      auto-increment: false"
	echo "    join:"
	echo "      auto-detection:"
	echo "        enabled: false"
	echo "      multicast:"
	echo "        enabled: false"
	if [ -n "${HZ_MEMBERS:-}" ]; then
		echo "      tcp-ip:"
		echo "        enabled: true"
		echo "        member-list:"
		for m in $(echo "$HZ_MEMBERS" | tr ',' ' '); do
			echo "          - $m"
		done
	fi
} >"$cfg"

# Phone-home off: nothing leaves the machine. A small heap and the serial
# collector suit a test member on a shared 2-core machine. The --add-opens
# let the member use the JDK internals it asks for without warnings.
# shellcheck disable=SC2086
exec java -Xms64m -Xmx384m -XX:+UseSerialGC \
	--add-modules java.se \
	--add-exports java.base/jdk.internal.ref=ALL-UNNAMED \
	--add-opens java.base/java.lang=ALL-UNNAMED \
	--add-opens java.base/sun.nio.ch=ALL-UNNAMED \
	--add-opens java.management/sun.management=ALL-UNNAMED \
	--add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED \
	-Dhazelcast.config="$cfg" \
	-Dhazelcast.phone.home.enabled=false \
	-Dhazelcast.health.monitoring.level=OFF \
	-Dhazelcast.shutdownhook.policy=TERMINATE \
	${HZ_PROPS:-} \
	-cp /opt/hazelcast/hazelcast.jar com.hazelcast.core.server.HazelcastMemberStarter
