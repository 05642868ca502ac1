// Kernels for faultkit's code-object tests; scripts/build_code_objects.sh compiles them.
__kernel void scale(__global float *out, __global const float *in, float a) {
    int i = __builtin_amdgcn_workitem_id_x();
    out[i] = a * in[i];
}

__kernel void oob_store(__global int *p, int n) {
    int i = __builtin_amdgcn_workitem_id_x();
    p[i + n] = i;
}
