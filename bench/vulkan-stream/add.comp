// c[i] = a[i] + b[i] over n floats, one scalar per thread like poot's
// elementwise kernels; the indexing is copy.comp's.
#version 450
layout(local_size_x = 256) in;
layout(push_constant) uniform Params { uint n; } p;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer C { float c[]; };

void main() {
  uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * 256u;
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  for (; i < p.n; i += stride) c[i] = a[i] + b[i];
}
