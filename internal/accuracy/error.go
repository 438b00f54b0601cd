package accuracy

import "fmt"

// Error is the model's measured error for one class: the largest error of
// throttled_usec among the accuracy table's rows of the class, beyond the
// one scheduler tick the target always accepts, in percent of the
// measured mean; at least the target the rows are held to (5% pinned,
// 10% unpinned).
type Error struct {
	Class Class
	// Percent is the largest error, ≥ 0.
	Percent float64
	// Rows is how many rows of the accuracy run the class had.
	Rows int
	// Worst names the row with the largest error and its error before
	// the tick is taken off, e.g.
	// "compare-chapter-parallelism-2cpu.scn v1 app: +33.8%".
	Worst string
}

// ErrorOf returns the measured error of class c.
func ErrorOf(c Class) (Error, error) {
	for _, e := range measured {
		if e.Class == c {
			return e, nil
		}
	}
	return Error{}, fmt.Errorf("accuracy: no measured error for class %q: the accuracy run had no row of it (scripts/accuracy.sh -w regenerates internal/accuracy/measured.go)", c)
}

// Measured returns the error of every class the accuracy run measured,
// in the order of [Classes].
func Measured() []Error {
	return append([]Error(nil), measured...)
}
