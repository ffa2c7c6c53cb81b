package partition

import "math/bits"

// This file: the fixed hashes. They are the same in every process and every
// version of Go (no seed, no maphash), so that gateways in front of the same
// replicas agree on where a key lives.

const (
	prime1 = 0x9E3779B185EBCA87
	prime2 = 0xC2B2AE3D27D4EB4F
)

// mix is MurmurHash3's 64-bit finalizer: a bijection in which every input
// bit flips each output bit with probability about one half.
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// hashString hashes s eight bytes at a time (the compiler merges the byte
// loads into one); a tail of 1 to 7 bytes is read as the last eight bytes
// of s, overlapping, or, in a string shorter than eight, as two
// overlapping halves: no loop over bytes. The length is mixed in first, so
// the overlap cannot make two strings of different lengths collide more
// than any others. It does not allocate.
func hashString(s string) uint64 {
	n := len(s)
	h := uint64(n)*prime1 + prime2
	switch {
	case n >= 8:
		for i := 0; i < n-8; i += 8 {
			h = round(h, load64(s[i:]))
		}
		h = round(h, load64(s[n-8:])) // the last eight bytes, overlapping the word before when n%8 != 0
	case n >= 4:
		h = round(h, uint64(load32(s))<<32|uint64(load32(s[n-4:])))
	case n > 0:
		h = round(h, uint64(s[0])<<16|uint64(s[n/2])<<8|uint64(s[n-1]))
	}
	return mix(h)
}

func round(h, w uint64) uint64 { return bits.RotateLeft64(h^w*prime2, 31) * prime1 }

func load64(s string) uint64 {
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func load32(s string) uint32 {
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// partitionOf maps a key's hash to [0, n) by multiplication (Lemire's
// reduction): uniform, no division, and it uses the hash's high bits, while
// the sketch picks its shard from the low ones.
func partitionOf(h uint64, n int) int {
	hi, _ := bits.Mul64(h, uint64(n))
	return int(hi)
}

// partitionSeed is the hash rendezvous weighs replicas against for
// partition p.
func partitionSeed(p int) uint64 { return mix(uint64(p)*prime2 + prime1) }

// weight is the rendezvous (highest random weight) score of the replica
// whose name hashes to replicaHash for the partition or key whose seed is
// seed: the owners are the replicas of highest weight.
func weight(replicaHash, seed uint64) uint64 { return mix(replicaHash ^ seed) }

// rankTop fills top (whose length is the count wanted, at most len(hashes))
// with the indices of the replicas of highest weight for seed, highest
// first, skipping those for which skip returns true. It returns how many it
// found.
func rankTop(top []int32, hashes []uint64, seed uint64, skip func(int32) bool) int {
	if len(top) == 0 {
		return 0
	}
	var ws [MaxHotReplicas]uint64
	n := 0
	for i, rh := range hashes {
		if skip != nil && skip(int32(i)) {
			continue
		}
		w := weight(rh, seed)
		if n == len(top) && w <= ws[n-1] {
			continue
		}
		j := min(n, len(top)-1)
		for j > 0 && ws[j-1] < w {
			ws[j], top[j] = ws[j-1], top[j-1]
			j--
		}
		ws[j], top[j] = w, int32(i)
		if n < len(top) {
			n++
		}
	}
	return n
}
