@0xe3c0b4a2d1f59a17;
# The shape of the module bundle workerd loads as its Pyodide runtime: the
# wire layout (field ordinals and types) of `Bundle` and `Module` in workerd's
# src/workerd/jsg/modules.capnp. Only what build_pyodide_bundle.py writes.

struct Bundle {
  modules @0 :List(Module);
}

struct Module {
  name @0 :Text;
  union {
    src @1 :Data;
    wasm @4 :Data;
    data @5 :Data;
    json @6 :Text;
  }
  tsDeclaration @3 :Text;
  type @2 :ModuleType;
  compileCache @7 :Data;
}

enum ModuleType {
  bundle @0;
  builtin @1;
  internal @2;
}
