package jsondec

import (
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// TestBorrowStartsAfresh: a borrowed decoder reads its own value with its
// own options, whatever the previous borrower left it in the middle of.
func TestBorrowStartsAfresh(t *testing.T) {
	d := Borrow([]byte(`{"a":[1,2,{"b":`), jsontext.AllowDuplicateNames(true))
	for range 4 {
		if _, err := d.ReadToken(); err != nil {
			t.Fatal(err)
		}
	}
	Return(d)
	for range 8 { // the pool may hand back this decoder or another
		d := Borrow([]byte(` {"x":1,"x":2} `))
		v, err := d.ReadValue()
		Return(d)
		if err == nil {
			t.Fatalf("a duplicate name was read under an earlier borrower's options: %s", v)
		}
		d = Borrow([]byte(`{"x":1,"x":2}`), jsontext.AllowDuplicateNames(true))
		if _, err := d.ReadValue(); err != nil {
			t.Fatalf("the borrower's own options were not applied: %v", err)
		}
		Return(d)
		d = Borrow([]byte(`"ok"`))
		tok, err := d.ReadToken()
		if err != nil || tok.String() != "ok" || d.StackDepth() != 0 {
			t.Fatalf("a fresh value read as %v, %v at depth %d", tok, err, d.StackDepth())
		}
		Return(d)
	}
}
