package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// input reads what the CLI's file flags name, as kubectl's -f does: a path, or - for stdin.
// Stdin can be read once: a second - is refused, naming both flags.
type input struct {
	stdin io.Reader
	// stdinFor is the flag that read stdin, "" while none has.
	stdinFor string
}

// read returns the contents of path, given to flag, and the name to report it under.
func (in *input) read(flag, path string) (string, []byte, error) {
	if path != "-" {
		data, err := os.ReadFile(path)
		return path, data, err
	}
	if in.stdinFor != "" {
		return "stdin", nil, fmt.Errorf("%s - and %s - both read stdin: give a file to one of them", in.stdinFor, flag)
	}
	in.stdinFor = flag
	if in.stdin == nil {
		return "stdin", nil, errors.New("no stdin to read")
	}
	data, err := io.ReadAll(in.stdin)
	return "stdin", data, err
}

// documents splits data, read from name, into its YAML documents (JSON is one), leaving out
// those that hold only comments and blank lines.
func documents(name string, data []byte) ([][]byte, error) {
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out [][]byte
	for n := 1; ; n++ {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %v", name, n, err)
		}
		if !isEmptyDocument(doc) {
			out = append(out, doc)
		}
	}
}

// oneDocument returns the only document of data, read from name for flag: several are refused,
// never read as the first alone.
func oneDocument(flag, name string, data []byte) ([]byte, error) {
	docs, err := documents(name, data)
	if err != nil {
		return nil, err
	}
	switch len(docs) {
	case 0:
		return nil, fmt.Errorf("%s: empty", name)
	case 1:
		return docs[0], nil
	}
	return nil, fmt.Errorf("%s holds %d documents: %s takes one", name, len(docs), flag)
}

// isEmptyDocument says whether a YAML document holds nothing but comments and blank lines.
func isEmptyDocument(doc []byte) bool {
	j, err := yaml.YAMLToJSON(doc)
	return err == nil && (len(bytes.TrimSpace(j)) == 0 || string(bytes.TrimSpace(j)) == "null")
}
