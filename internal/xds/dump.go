package xds

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ParseDump reads the RateLimitConfig resources of a snapshot written out
// as text: one RateLimitConfig, or a list of them, in protobuf JSON (field
// names as in the .proto or in lowerCamelCase, units as SECOND, MINUTE,
// ...), or the same in YAML, which is read as the JSON it stands for.
// Envoy Gateway's dumps of what it serves are of this form. An element may
// carry the "@type" of an Any, which must then be TypeURL.
//
// A field that this build's RateLimitConfig does not have is refused,
// unless it holds its zero value (false, 0, "", null, [] or {}): a dump
// made with a newer module writes every field out, and a zero value is
// what an absent field means, but a set one would change a limit. Errors
// name the element and the field's path.
func ParseDump(data []byte) ([]*rlsconfv3.RateLimitConfig, error) {
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("neither JSON nor YAML: %w", err)
	}
	var items []any
	switch d := doc.(type) {
	case nil:
		return nil, errors.New("empty: want a RateLimitConfig or a list of them")
	case []any:
		items = d
	case map[string]any:
		items = []any{d}
	default:
		return nil, fmt.Errorf("want a RateLimitConfig (a mapping) or a list of them, got %T", doc)
	}
	msgs := make([]*rlsconfv3.RateLimitConfig, 0, len(items))
	md := (&rlsconfv3.RateLimitConfig{}).ProtoReflect().Descriptor()
	for i, item := range items {
		at := fmt.Sprintf("[%d]", i)
		obj, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: want a RateLimitConfig (a mapping), got %s", at, kindName(item))
		}
		if name, ok := obj["name"].(string); ok && name != "" {
			at = fmt.Sprintf("[%d] (%s)", i, name)
		}
		if t, ok := obj["@type"]; ok {
			if t != TypeURL {
				return nil, fmt.Errorf("%s: @type: want %s, got %v", at, TypeURL, t)
			}
			delete(obj, "@type")
		}
		if err := pruneZeroUnknown(obj, md, ""); err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		js, err := json.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		m := &rlsconfv3.RateLimitConfig{}
		if err := protojson.Unmarshal(js, m); err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// pruneZeroUnknown removes from obj, a message md in JSON form, the fields
// md does not have whose values are zero, and refuses the others; it does
// the same inside the fields that are messages. It also checks the kind of
// every scalar (and the name of every enum value), so that a mistake is
// named by its path rather than by an offset into JSON that, for YAML, the
// user never wrote. path is obj's place, for errors.
func pruneZeroUnknown(obj map[string]any, md protoreflect.MessageDescriptor, path string) error {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		at := k
		if path != "" {
			at = path + "." + k
		}
		fd := md.Fields().ByJSONName(k)
		if fd == nil {
			fd = md.Fields().ByTextName(k)
		}
		if fd == nil {
			if !isZero(obj[k]) {
				return fmt.Errorf("%s: unknown field (known: %s)", at, fieldNames(md))
			}
			delete(obj, k)
			continue
		}
		v := obj[k]
		if v == nil {
			continue // null is the field's default
		}
		if !fd.IsList() {
			if err := checkValue(fd, v, at); err != nil {
				return err
			}
			continue
		}
		l, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: want a list, got %s", at, kindName(v))
		}
		for i, e := range l {
			if err := checkValue(fd, e, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkValue checks one value of field fd, at path at: a message's fields
// in turn, or a scalar's kind.
func checkValue(fd protoreflect.FieldDescriptor, v any, at string) error {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want a mapping, got %s", at, kindName(v))
		}
		return pruneZeroUnknown(m, fd.Message(), at)
	case protoreflect.StringKind:
		if _, ok := v.(string); !ok {
			return fmt.Errorf("%s: want a string, got %s", at, kindName(v))
		}
	case protoreflect.BoolKind:
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: want true or false, got %s", at, kindName(v))
		}
	case protoreflect.EnumKind:
		values := fd.Enum().Values()
		if name, ok := v.(string); ok && values.ByName(protoreflect.Name(name)) != nil {
			return nil
		}
		if n, ok := v.(int); ok && values.ByNumber(protoreflect.EnumNumber(n)) != nil {
			return nil
		}
		var names []string // but the zero value, which means none
		for i := range values.Len() {
			if values.Get(i).Number() != 0 {
				names = append(names, string(values.Get(i).Name()))
			}
		}
		return fmt.Errorf("%s: want %s, got %s", at, strings.Join(names, ", "), kindName(v))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		if n, ok := v.(int); !ok || n < 0 || n > math.MaxUint32 {
			return fmt.Errorf("%s: want a whole number from 0 to %d, got %s", at, uint32(math.MaxUint32), kindName(v))
		}
	}
	return nil // other kinds are left to protojson: this message has none
}

// isZero reports whether a JSON value is what an absent field means.
func isZero(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case bool:
		return !v
	case string:
		return v == ""
	case int:
		return v == 0
	case float64:
		return v == 0
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

// fieldNames lists md's fields by their .proto names.
func fieldNames(md protoreflect.MessageDescriptor) string {
	names := make([]string, md.Fields().Len())
	for i := range names {
		names[i] = string(md.Fields().Get(i).Name())
	}
	return strings.Join(names, ", ")
}

// kindName shows a value in an error: a scalar as itself (a string
// quoted), a list or a mapping by its kind.
func kindName(v any) string {
	switch v := v.(type) {
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	case nil:
		return "null"
	case string:
		return strconv.Quote(v)
	}
	return fmt.Sprintf("%v", v)
}
