// dst[i] = src[i] over n vec4s. Threads are numbered across a 2D grid (the
// host splits a group count past maxComputeWorkGroupCount[0] into rows) and
// loop with the grid's stride: one iteration each when the grid covers n, a
// grid-stride loop when the host launches fewer groups (--wgs).
#version 450
layout(local_size_x = 256) in;
layout(push_constant) uniform Params { uint n; } p;
layout(std430, binding = 0) readonly buffer Src { vec4 src[]; };
layout(std430, binding = 1) writeonly buffer Dst { vec4 dst[]; };

void main() {
  uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * 256u;
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  for (; i < p.n; i += stride) dst[i] = src[i];
}
