/** The network rule's shared test parts: a loopback DNS server and the loopback-only checks. */
package openshell.tests.support;
