package redis

import "strings"

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// keySlot returns the Cluster hash slot of the Redis key name, as the server
// computes it: CRC16 (XMODEM) of its hash tag (what lies between its first
// '{' and the first '}' after it, when that is not empty), or of the whole
// name, modulo 16384. AcquireAny needs it to send each script only keys of
// one slot; go-redis keeps its own copy internal.
func keySlot(name string) int {
	if open := strings.IndexByte(name, '{'); open >= 0 {
		if n := strings.IndexByte(name[open+1:], '}'); n > 0 {
			name = name[open+1 : open+1+n]
		}
	}
	return int(crc16(name)) % clusterSlots
}

// crc16 is the CRC-16/XMODEM of s (polynomial 0x1021, initial value 0, no
// reflection), the checksum Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
