/** The DNS wire format shared by the supervisor, the sandbox runtime and the conformance kit (a qualified export). */
package openshell.isolation.dns;
