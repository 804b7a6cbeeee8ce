package main

import (
	"runtime/debug"
	"strings"
)

// version describes the build of this binary: the module version when it
// was installed as a module (go install ...@v1.2.3), else "(devel)" and
// the commit it was built from, as the go command stamped it, with
// "modified" when the working tree had changes.
func version(info *debug.BuildInfo, ok bool) string {
	if !ok {
		return "dlock: no build information (built without module support)"
	}
	var b strings.Builder
	b.WriteString("dlock ")
	b.WriteString(info.Main.Version)
	if info.Main.Version == "" {
		b.WriteString("(unknown)")
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		b.WriteString(", revision ")
		b.WriteString(rev)
		if t := settings["vcs.time"]; t != "" {
			b.WriteString(" (" + t + ")")
		}
		if settings["vcs.modified"] == "true" {
			b.WriteString(", modified")
		}
	}
	if info.GoVersion != "" {
		b.WriteString(", " + info.GoVersion)
	}
	return b.String()
}
