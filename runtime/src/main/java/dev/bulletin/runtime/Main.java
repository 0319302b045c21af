package dev.bulletin.runtime; public class Main { public static void main(String[] a) {} }
