package partition

import (
	"sync/atomic"
	"time"
)

// recent remembers which keys were read lately, and where a read of one
// spilled (see Owners.Cold): a direct-mapped table of recentSlots words,
// one per key hash, each holding a fingerprint of the key's hash, the
// epoch of its last read and the owner it spilled to. Two keys that share
// a slot take turns in it: the loser looks cold, and its next read may
// spill, which costs it one miss at most. A read of a key already noted
// this epoch writes nothing, so a hot key's slot is not a cache line every
// core writes.
type recent struct {
	slots []atomic.Uint64
}

const (
	// recentSlots is the table's size: 2 MiB, 262,144 slots. The distinct
	// keys of 30 s at a few thousand reads a second fill a few per cent of
	// them, so few keys lose their slot (and with it where they spilled).
	recentSlots = 1 << 18
	// recentEpoch is one epoch. A key read in this epoch or the one before
	// it is warm: cold means unread for 15 to 30 s, about the life of an
	// entry in a small cache at a few hundred misses a second (bench/skew's
	// 2,000-key LRUs), after which its home is not likely to hold it.
	recentEpoch = 15 * time.Second
)

func newRecent() *recent { return &recent{slots: make([]atomic.Uint64, recentSlots)} }

// A slot's word: the top 32 bits the fingerprint (the hash's top half),
// then 16 bits of epoch, then 8 bits of the owner a read spilled to (its
// index in the partition's owners; 0: none, since the home is index 0).
func word(fp uint32, epoch uint16, spilled uint8) uint64 {
	return uint64(fp)<<32 | uint64(epoch)<<8 | uint64(spilled)
}

func epochAt(now time.Time) uint16 { return uint16(now.UnixNano() / int64(recentEpoch)) }

// read notes a read of the key of hash h at now and returns whether the
// key was cold (not read in this epoch or the one before) and, if it was
// not, the owner its last spilled read went to (0: none).
func (r *recent) read(h uint64, now time.Time) (cold bool, spilled int) {
	slot := &r.slots[h&(recentSlots-1)]
	fp, ep := uint32(h>>32), epochAt(now)
	w := slot.Load()
	if uint32(w>>32) == fp && w != 0 {
		seen := uint16(w >> 8)
		if seen == ep {
			return false, int(uint8(w))
		}
		if ep-seen == 1 {
			slot.Store(word(fp, ep, uint8(w)))
			return false, int(uint8(w))
		}
	}
	slot.Store(word(fp, ep, 0))
	return true, 0
}

// spill notes that a read of the key of hash h went to its partition's
// owner k (k > 0) at now.
func (r *recent) spill(h uint64, k int, now time.Time) {
	if k <= 0 || k > 255 {
		return
	}
	r.slots[h&(recentSlots-1)].Store(word(uint32(h>>32), epochAt(now), uint8(k)))
}
