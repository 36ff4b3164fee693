/* Which declarations libferry and libferry-ps export. Both libraries are
 * compiled with -fvisibility=hidden (and inline functions hidden), so only
 * what a public header marks FERRY_API reaches the dynamic symbol table; a
 * linker version script per library (client/libferry.map,
 * client/ps/libferry-ps.map) then versions those symbols and keeps out
 * anything else. FERRY_LOCAL keeps a private member of an exported class
 * inside the library. tests/abi lists what each library may export. */
#ifndef FERRY_VISIBILITY_H
#define FERRY_VISIBILITY_H

#if defined(__GNUC__)
#define FERRY_API __attribute__((visibility("default")))
#define FERRY_LOCAL __attribute__((visibility("hidden")))
#else
#define FERRY_API
#define FERRY_LOCAL
#endif

#endif /* FERRY_VISIBILITY_H */
