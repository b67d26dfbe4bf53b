package chart

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// volumeGen numbers the kubelet's timestamped directories, so that two
// written within one clock tick still differ.
var volumeGen atomic.Int64

// writeVolume lays out a ConfigMap's or Secret's data under dir as the
// kubelet's atomic writer does: the files in a timestamped directory
// (..2026_12_02_02_50_00.1), a ..data symlink to it, and for each key a
// symlink key -> ..data/key. Called again on the same dir, it swaps the
// data the way an update does: the new directory is written, ..data is
// replaced by a rename, then the old directory and the keys that went are
// removed.
func writeVolume(t testing.TB, dir string, data map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	ts := fmt.Sprintf("..%s.%d", time.Now().UTC().Format("2006_01_02_15_04_05"), volumeGen.Add(1))
	if err := os.Mkdir(filepath.Join(dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(dir, ts, k), v, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for k := range data {
		link := filepath.Join(dir, k)
		if _, err := os.Lstat(link); err != nil {
			if err := os.Symlink(filepath.Join("..data", k), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	if old == "" {
		return
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if _, kept := data[e.Name()]; !kept && !strings.HasPrefix(e.Name(), "..") {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
		t.Fatal(err)
	}
}

// podFiles lays out the container's volume mounts under root, as the
// kubelet would: the chart's ConfigMap from the rendered object, other
// ConfigMaps and the Secrets from configMaps and secrets by name.
func podFiles(t testing.TB, root string, o objects, configMaps, secrets map[string]map[string][]byte) {
	t.Helper()
	vols := map[string]corev1.Volume{}
	for _, v := range o.deployment.Spec.Template.Spec.Volumes {
		vols[v.Name] = v
	}
	for _, m := range o.container(t).VolumeMounts {
		v := vols[m.Name]
		var data map[string][]byte
		switch {
		case v.ConfigMap != nil && o.configMap != nil && v.ConfigMap.Name == o.configMap.Name:
			data = map[string][]byte{}
			for k, s := range o.configMap.Data {
				data[k] = []byte(s)
			}
		case v.ConfigMap != nil:
			data = configMaps[v.ConfigMap.Name]
		case v.Secret != nil:
			data = secrets[v.Secret.SecretName]
		}
		if data == nil {
			t.Fatalf("volume %s: no data for %+v", m.Name, v.VolumeSource)
		}
		writeVolume(t, filepath.Join(root, m.MountPath), data)
	}
}

// snapshot lists every path under root but c's mounts (read-only in the
// pod, and updated by the test as by the kubelet) with its size, mode and
// time, to tell whether a process wrote anything there.
func snapshot(t testing.TB, root string, c corev1.Container) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if rel, _ := filepath.Rel(root, p); rel != "." {
			if _, mounted := mountOf(c, "/"+filepath.ToSlash(rel)); mounted {
				return filepath.SkipDir
			}
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("%s %v %d %v", p, info.Mode(), info.Size(), info.ModTime().UnixNano()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}
