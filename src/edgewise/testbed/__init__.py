"""A cluster file made real on one Linux host: Ray nodes in namespaces, cgroups, tc links."""
