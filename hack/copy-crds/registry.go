package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	configv1 "github.com/openshift/api/config/v1"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
	_ "github.com/bootimage-operator/bootimage-operator/bootimage/platforms"
	"github.com/bootimage-operator/bootimage-operator/manifests"
)

// allGates turns every gate on: the manifests allow the widest the code manages.
type allGates struct{}

func (allGates) Enabled(configv1.FeatureGateName) bool { return true }

// writeRegistry rewrites, from the platform registry, the admission policy's platform lists and
// the Cluster API Roles' infrastructure kinds, so a new platform is its folder and one line of
// bootimage/platforms (manifests/registry_test.go fails when they drift).
func writeRegistry(root string) error {
	lists := map[string]func(configv1.PlatformType, bootimage.Gates) bool{
		"newMachineSetOptIns": bootimage.MachineSetsSupported,
		"newCPMSOptIns":       bootimage.CPMSSupported,
		"newCAPIOptIns":       bootimage.ClusterAPISupported,
	}
	platformList := regexp.MustCompile(`variables\.platform in \[[^\]]*\]`)
	// The refusal says where the entry is supported, in the words of its validation's list.
	supportedOn := regexp.MustCompile(`only supported on .*?, and this cluster runs on`)
	err := rewrite(filepath.Join(root, "manifests", manifests.AdmissionFile), func(s string) string {
		lines := strings.Split(s, "\n")
		for i, line := range lines {
			for optIns, managed := range lists {
				if !strings.Contains(line, "variables."+optIns+".size() == 0") {
					continue
				}
				var names, quoted []string
				for _, p := range bootimage.Platforms() {
					if t := p.Traits().Type; managed(t, allGates{}) {
						names, quoted = append(names, string(t)), append(quoted, "'"+string(t)+"'")
					}
				}
				lines[i] = platformList.ReplaceAllString(line, "variables.platform in ["+strings.Join(quoted, ", ")+"]")
				if i+1 < len(lines) {
					words := strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
					lines[i+1] = supportedOn.ReplaceAllString(lines[i+1], "only supported on "+words+", and this cluster runs on")
				}
			}
		}
		return strings.Join(lines, "\n")
	})
	if err != nil {
		return err
	}
	var machines, templates []string
	for _, kind := range bootimage.TemplateKinds() {
		templates = append(templates, strings.ToLower(kind)+"s")
		machines = append(machines, strings.ToLower(strings.TrimSuffix(kind, "Template"))+"s")
	}
	rule := func(verbs string) *regexp.Regexp {
		return regexp.MustCompile(`(- apiGroups: \[` + regexp.QuoteMeta(clusterapi.InfrastructureGroup) + `\]\n  resources: \[)[^\]]*(\]\n  verbs: \[` + regexp.QuoteMeta(verbs) + `\]\n)`)
	}
	for _, file := range []string{manifests.RBACFile, filepath.Join(manifests.EmbeddedDir, manifests.EmbeddedClusterAPIRoleFile)} {
		err := rewrite(filepath.Join(root, "manifests", file), func(s string) string {
			s = rule("get, list, watch").ReplaceAllString(s, "${1}"+strings.Join(machines, ", ")+"${2}")
			return rule("get, list, watch, create, delete").ReplaceAllString(s, "${1}"+strings.Join(templates, ", ")+"${2}")
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// rewrite replaces the content of path with edit's, keeping its mode.
func rewrite(path string, edit func(string) string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(edit(string(data))), info.Mode()); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
