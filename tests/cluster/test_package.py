"""The package's names: the schema's and the topologies' load on first use, each the object
of its home module, and a process that needs only the model (a member process) imports
neither the schema's jsonschema nor the topologies' networkx, nor Pillow for image folders."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import edgewise.cluster as package

HOMES = {"catalog": ("DeviceType", "catalog", "device_type"),
         "model": ("BackgroundApp", "Cluster", "Device", "Link", "Role", "Site"),
         "schema": ("cluster_from_dict", "load_cluster"),
         "topology": ("clustered", "grid", "random_cluster", "random_geometric", "ring",
                      "seifer_bandwidth_mbps", "seifer_positions")}


def test_every_exported_name_is_its_home_modules_object() -> None:
    assert sorted(n for names in HOMES.values() for n in names) == sorted(package.__all__)
    for module, names in HOMES.items():
        home = importlib.import_module(f"edgewise.cluster.{module}")
        for name in names:
            assert getattr(package, name) is getattr(home, name), name
    assert callable(package.catalog)  # the function, not its module of the same name
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        package.nothing  # noqa: B018


def test_the_model_and_image_decoding_load_without_the_heavy_imports() -> None:
    code = ("import sys, edgewise.cluster.model, edgewise.nn.workload.images; "
            "print(sorted({'networkx', 'jsonschema', 'PIL'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.strip() == "[]"
