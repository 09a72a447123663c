package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

var durationType = reflect.TypeFor[time.Duration]()

// convert is the decode hook: it reads strings (from the environment, flags or quoted
// YAML) as the target type, and words every type mismatch for a person.
func convert(from, to reflect.Value) (any, error) {
	if !from.IsValid() {
		return nil, nil
	}
	data := from.Interface()
	t := to.Type()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationType {
		switch v := data.(type) {
		case time.Duration:
			return v, nil
		case string:
			d, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil {
				return nil, fmt.Errorf("expected a duration like \"10s\", got %q", v)
			}
			return d, nil
		case int:
			if v == 0 {
				return time.Duration(0), nil
			}
		}
		return nil, fmt.Errorf("expected a duration like \"10s\", got %s", describeValue(data))
	}
	fk := from.Kind()
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		switch fk {
		case reflect.String:
			n, err := strconv.ParseInt(strings.TrimSpace(data.(string)), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("expected a number, got %q", data)
			}
			return n, nil
		case reflect.Float32, reflect.Float64:
			f := from.Float()
			if f != math.Trunc(f) {
				return nil, fmt.Errorf("expected a whole number, got %v", f)
			}
			return int64(f), nil
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			return data, nil
		}
		return nil, fmt.Errorf("expected a number, got %s", describeValue(data))
	case reflect.Float32, reflect.Float64:
		switch fk {
		case reflect.String:
			f, err := strconv.ParseFloat(strings.TrimSpace(data.(string)), 64)
			if err != nil {
				return nil, fmt.Errorf("expected a number, got %q", data)
			}
			return f, nil
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
			reflect.Float32, reflect.Float64:
			return data, nil
		}
		return nil, fmt.Errorf("expected a number, got %s", describeValue(data))
	case reflect.Bool:
		switch fk {
		case reflect.Bool:
			return data, nil
		case reflect.String:
			b, err := strconv.ParseBool(strings.TrimSpace(data.(string)))
			if err != nil {
				return nil, fmt.Errorf("expected true or false, got %q", data)
			}
			return b, nil
		}
		return nil, fmt.Errorf("expected true or false, got %s", describeValue(data))
	case reflect.String:
		switch fk {
		case reflect.String:
			return data, nil
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
			reflect.Float32, reflect.Float64:
			return fmt.Sprint(data), nil // name: 2024
		}
		return nil, fmt.Errorf("expected a string, got %s", describeValue(data))
	case reflect.Slice:
		switch fk {
		case reflect.Slice, reflect.Array:
			return data, nil
		case reflect.String:
			if t.Elem().Kind() == reflect.String { // "a,b" from the environment
				var out []any
				for _, s := range strings.Split(data.(string), ",") {
					if s = strings.TrimSpace(s); s != "" {
						out = append(out, s)
					}
				}
				return out, nil
			}
		}
		return nil, fmt.Errorf("expected a list, got %s", describeValue(data))
	case reflect.Struct:
		if fk == reflect.Map || fk == reflect.Struct {
			return data, nil
		}
		return nil, fmt.Errorf("expected a map of keys, got %s", describeValue(data))
	}
	return data, nil
}
