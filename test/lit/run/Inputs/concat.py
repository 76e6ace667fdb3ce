# Writes a graph whose one eqn is a Concat of N inputs f32[2] (N from argv):
# it binds N + 1 storage buffers, for the binding-limit tests.
import sys

n = int(sys.argv[1])
print("graph concat")
for i in range(n):
    print(f"input %x{i} : f32[2]")
print("%y = Concat(" + ", ".join(f"%x{i}" for i in range(n)) + ") {axis=0} : f32[" + str(2 * n) + "]")
print("output %y")
