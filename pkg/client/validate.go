package client

import (
	"errors"
	"fmt"

	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// The caller's mistakes that Check finds before any call, each wrapped
// with where it is (errors.Is finds it). They are the service's own
// bounds (a request it would refuse with InvalidArgument) plus empty keys
// and values, which the service would count under a key nobody meant.
var (
	ErrNoDomain           = errors.New("client: empty domain")
	ErrNoDescriptors      = errors.New("client: no descriptors")
	ErrTooManyDescriptors = fmt.Errorf("client: more than %d descriptors", rls.MaxDescriptors)
	ErrNoEntries          = errors.New("client: descriptor without entries")
	ErrTooManyEntries     = fmt.Errorf("client: descriptor of more than %d entries", rls.MaxEntries)
	ErrEmptyKey           = errors.New("client: empty descriptor key")
	ErrEmptyValue         = errors.New("client: empty descriptor value")
)

// validate returns the first mistake of a request for domain and ds.
func validate(domain string, ds []Descriptor) error {
	switch {
	case domain == "":
		return ErrNoDomain
	case len(ds) == 0:
		return ErrNoDescriptors
	case len(ds) > rls.MaxDescriptors:
		return fmt.Errorf("%w: %d", ErrTooManyDescriptors, len(ds))
	}
	for i, d := range ds {
		switch {
		case len(d) == 0:
			return fmt.Errorf("%w: descriptor %d", ErrNoEntries, i)
		case len(d) > rls.MaxEntries:
			return fmt.Errorf("%w: descriptor %d has %d", ErrTooManyEntries, i, len(d))
		}
		for j, e := range d {
			switch {
			case e.Key == "":
				return fmt.Errorf("%w: descriptor %d, entry %d", ErrEmptyKey, i, j)
			case e.Value == "":
				return fmt.Errorf("%w: descriptor %d, entry %d (key %q)", ErrEmptyValue, i, j, e.Key)
			}
		}
	}
	return nil
}
