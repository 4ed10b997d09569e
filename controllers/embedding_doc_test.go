package controllers_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEmbeddingExampleCompiles type-checks the example of docs/embedding.md as written: its
// imports, and its statements in a function that declares what an embedder has at hand (the REST
// config, logger, registry, scheme and context, the MCO's ctrlctx, version and ctrlcommon). A drifted
// example fails here.
func TestEmbeddingExampleCompiles(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "embedding.md"))
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```go\n(.*?)```").FindSubmatch(doc)
	if block == nil {
		t.Fatal("docs/embedding.md has no Go example")
	}
	example := string(block[1])
	imports, body, found := strings.Cut(example, "\n)\n")
	if !found || !strings.HasPrefix(imports, "import (") {
		t.Fatalf("the example does not start with an import block:\n%s", example)
	}
	imports = strings.TrimPrefix(imports, "import (")
	// What the embedder's file imports anyway, unless the example does.
	for _, path := range []string{
		`"context"`, `"fmt"`, `"github.com/go-logr/logr"`, `"github.com/prometheus/client_golang/prometheus"`,
		`"k8s.io/apimachinery/pkg/runtime"`, `"k8s.io/client-go/rest"`, `ctrl "sigs.k8s.io/controller-runtime"`,
		`metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"`,
	} {
		if !strings.Contains(imports, path[strings.Index(path, `"`):]) {
			imports += "\n\t" + path
		}
	}
	src := "package embedder\n\nimport (" + imports + "\n)\n\n" + `// The MCO's controller context, version and common packages, as the example names them.
var ctrlctx struct{ FeatureGatesHandler controllers.FeatureGateSet }
var version struct{ ReleaseVersion string }
var ctrlcommon struct{ WriteTerminationError func(error) }

func embed(ctx context.Context, restConfig *rest.Config, logger logr.Logger, registry prometheus.Registerer, myScheme *runtime.Scheme) {
` + body + "\t_, _ = mgr, err\n}\n"
	file := filepath.Join(t.TempDir(), "embedder.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	vet := exec.Command("go", "vet", file)
	vet.Dir = ".."
	if out, err := vet.CombinedOutput(); err != nil {
		t.Fatalf("the example of docs/embedding.md does not compile: %v\n%s\n--- as checked:\n%s", err, out, src)
	}
}
