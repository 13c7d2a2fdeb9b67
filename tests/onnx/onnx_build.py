"""An ONNX model as a user builds it: `nestc import` to a .nest file and its weights,
`nestc build`, and a C driver (tests/compiled/run.py's) that calls the entry on .npy inputs
and writes its results as .npy files. Shared by the cli checks of resized.py and quantized.py."""
import os
import subprocess


def build_and_run(nestc, d, run, short, cr, path, name, input_npy, out_npys):
    """Writes the results of the compiled model on input_npy (the entry's first input) to
    out_npys; None, or why it failed."""
    nest, wf = os.path.join(d, name + ".nest"), os.path.join(d, name + ".safetensors")
    r = run([nestc, "import", path, "-o", nest, "-w", wf])
    od = os.path.join(d, name + ".out")
    if not r.returncode:
        r = run([nestc, "build", nest, "-o", od, "--name", name, "-j1", "--no-cache"])
    if r.returncode:
        return "import or build: exit %d: %s" % (r.returncode, short(r.stderr))
    try:
        e = cr.parse_header(os.path.join(od, name + ".h"), name, strict_names=False)["forward"]
        call = cr.Call(e, wf, {e.inputs[0][0]: input_npy}, out_npys, twice=False)
        objs = sorted(os.path.join(od, f) for f in os.listdir(od) if f.endswith(".o"))
        exe = cr.compile_driver(d, [call], [name], [od], objs, name=name + "_driver")
        r = subprocess.run([exe], capture_output=True, text=True, timeout=120)
        return "exit %d: %s" % (r.returncode, short(r.stderr)) if r.returncode else None
    except cr.Fail as ex:
        return str(ex)
