package httpapi

import "testing"

func TestParseTokens(t *testing.T) {
	tk, err := ParseTokens([]byte("# who may reset\n\nops ops-0123456789abcdef\n  anon-0123456789abcdef  \n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		presented, name string
		ok              bool
	}{
		{"ops-0123456789abcdef", "ops", true},
		{"anon-0123456789abcdef", "line 4", true},
		{"ops-0123456789abcdeF", "", false},
		{"ops-0123456789abcde", "", false},
		{"", "", false},
	} {
		if name, ok := tk.check(c.presented); name != c.name || ok != c.ok {
			t.Errorf("check(%q): got %q %v, want %q %v", c.presented, name, ok, c.name, c.ok)
		}
	}
	var none *Tokens
	if _, ok := none.check("ops-0123456789abcdef"); ok {
		t.Error("no tokens accepted a token")
	}
}
