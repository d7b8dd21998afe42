package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written as Go writes one: "30s", "1m30s",
// "250ms". A bare number is refused: its unit would be a guess.
type Duration time.Duration

func (d *Duration) setScalar(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("must be a duration with a unit, as 30s or 250ms")
	}
	if v < 0 {
		return errors.New("must not be negative")
	}
	*d = Duration(v)
	return nil
}

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// ByteSize is a size in bytes, written as a number with an optional unit:
// B, KiB, MiB, GiB (powers of 1024) or kB, MB, GB (powers of 1000).
type ByteSize int64

var byteUnits = []struct {
	suffix string
	factor int64
}{
	{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}, {"B", 1},
}

func (b *ByteSize) setScalar(s string) error {
	num, factor := s, int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, factor = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.factor
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/factor {
		return errors.New("must be a size, as 4MiB, 512KiB or 1048576")
	}
	*b = ByteSize(n * factor)
	return nil
}

func (b ByteSize) String() string {
	for _, u := range byteUnits[:3] {
		if b >= ByteSize(u.factor) && int64(b)%u.factor == 0 {
			return strconv.FormatInt(int64(b)/u.factor, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}
