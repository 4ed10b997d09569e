package bootimage

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// jsonProblem says what is wrong with a JSON value in an admin's words: which field, what it holds
// and what it should hold, never the Go type it was read into.
func jsonProblem(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		where := ""
		if typeErr.Field != "" {
			where = " at " + typeErr.Field
		}
		return fmt.Sprintf("%s%s where %s is expected", article(typeErr.Value), where, jsonKind(typeErr.Type))
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("not valid JSON at byte %d", syntaxErr.Offset)
	}
	return "not valid JSON"
}

// article names a JSON value kind as encoding/json reports it ("string", "number 5", "object").
func article(value string) string {
	switch value {
	case "object", "array":
		return "an " + value
	case "bool":
		return "true or false"
	}
	return "a " + value
}

// jsonKind is the JSON kind a Go type is read from.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another kind of value"
}
